-- The snippet, the widest column, moves out of `messages` into its own table. Searches that
-- read every message (from:, larger:, has:attachment, and the counts behind `total`) then read
-- about half as many pages; only a page of results reads the snippets it shows.
CREATE TABLE message_text (
    id       INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    snippet  TEXT NOT NULL
) STRICT;

INSERT INTO message_text (id, snippet) SELECT id, snippet FROM messages WHERE snippet <> '';

ALTER TABLE messages DROP COLUMN snippet;
