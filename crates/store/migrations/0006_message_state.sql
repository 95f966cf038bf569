-- A message's changing state (modseq, read, flagged, raw flags, tags) moves out of the wide
-- messages row into a narrow row of its own. A write to 10,000 messages rewrites only these
-- rows: SQLite rewrites a whole row on any update, and the wide one (addresses, subject,
-- snippet) made the index update and the WAL pages it writes about three times larger.
CREATE TABLE message_state (
    id          INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    -- The server's modification sequence when last seen (0 without CONDSTORE).
    modseq      INTEGER NOT NULL DEFAULT 0,
    is_read     INTEGER NOT NULL DEFAULT 0,
    is_flagged  INTEGER NOT NULL DEFAULT 0,
    -- The provider's raw flag values (IMAP system flags and keywords, Gmail label ids) as a
    -- JSON array.
    flags       TEXT NOT NULL DEFAULT '[]',
    -- Our tags (IMAP keywords, Gmail label names) as a JSON array; message_tags indexes them.
    tags        TEXT NOT NULL DEFAULT '[]'
) STRICT;

INSERT INTO message_state (id, modseq, is_read, is_flagged, flags, tags)
    SELECT id, modseq, is_read, is_flagged, flags, tags FROM messages;

ALTER TABLE messages DROP COLUMN modseq;
ALTER TABLE messages DROP COLUMN is_read;
ALTER TABLE messages DROP COLUMN is_flagged;
ALTER TABLE messages DROP COLUMN flags;
ALTER TABLE messages DROP COLUMN tags;
