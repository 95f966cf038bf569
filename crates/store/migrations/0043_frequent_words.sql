-- The words many messages hold (at most 63, chosen by `store::frequent` after a sync once the
-- messages arrived since they were last chosen are a quarter of the index), each with the
-- number of messages whose full-text row holds it, kept exact by every write of `messages_fts`:
-- a search for one of them alone takes its count from here instead of reading every id it
-- matches. SQLite's alone: PostgreSQL counts from its own index.
CREATE TABLE frequent_words (
    slot     INTEGER PRIMARY KEY CHECK (slot BETWEEN 0 AND 62),
    word     TEXT NOT NULL UNIQUE,
    messages INTEGER NOT NULL
) STRICT;

-- How many messages the index held when they were last chosen, and how many arrived since
-- (one row, none before they first were).
CREATE TABLE frequent_words_chosen (
    messages INTEGER NOT NULL,
    arrived  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Which of them a message's full-text row holds, one bit a slot; no row for none of them.
CREATE TABLE message_frequent_words (
    id    INTEGER PRIMARY KEY,
    slots INTEGER NOT NULL
) STRICT;

-- Every word of `messages_fts` and the number of rows holding it, read by walking the index:
-- where the frequent words are chosen from.
CREATE VIRTUAL TABLE messages_fts_words USING fts5vocab(messages_fts, row);

-- A message removed takes its full-text row with it (`messages_fts_delete`), and its words
-- with it here. A trigger, as cascades from a mailbox or an account remove messages too.
CREATE TRIGGER message_frequent_words_delete AFTER DELETE ON messages BEGIN
    UPDATE frequent_words SET messages = messages - 1
        WHERE ((SELECT slots FROM message_frequent_words WHERE id = old.id) >> slot) & 1 = 1;
    DELETE FROM message_frequent_words WHERE id = old.id;
END;
