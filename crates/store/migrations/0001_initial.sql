-- The local index. Ground truth is always the mail server; every row here is derived from it
-- except accounts, credentials and (later) the journal.

CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    provider      TEXT NOT NULL,
    email         TEXT,
    -- Provider connection settings as JSON (host, port, TLS, endpoints). Never secrets.
    settings      TEXT NOT NULL,
    -- mailbroker_core::Capabilities as JSON.
    capabilities  TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_sync_at  INTEGER,
    -- An account-wide sync cursor for providers that have one (a history id, a delta link).
    sync_cursor   TEXT
) STRICT;

-- Secrets live only here: never in settings, never printed, never logged.
CREATE TABLE credentials (
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    secret      TEXT NOT NULL,
    PRIMARY KEY (account_id, kind)
) STRICT;

CREATE TABLE mailboxes (
    id             INTEGER PRIMARY KEY,
    account_id     TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    role           TEXT,
    delimiter      TEXT,
    selectable     INTEGER NOT NULL DEFAULT 1,
    -- Where the last completed sync stopped; 0 = unknown (refetch).
    uidvalidity    INTEGER NOT NULL DEFAULT 0,
    uidnext        INTEGER NOT NULL DEFAULT 0,
    highestmodseq  INTEGER NOT NULL DEFAULT 0,
    synced_at      INTEGER,
    UNIQUE (account_id, name)
) STRICT;

-- One row per server copy of a message: (mailbox, uidvalidity, uid) is its identity.
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    mailbox_id       INTEGER NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    uidvalidity      INTEGER NOT NULL,
    uid              INTEGER NOT NULL,
    modseq           INTEGER NOT NULL DEFAULT 0,
    message_id       TEXT,
    from_addr        TEXT NOT NULL DEFAULT '',
    to_addr          TEXT NOT NULL DEFAULT '',
    cc_addr          TEXT NOT NULL DEFAULT '',
    subject          TEXT NOT NULL DEFAULT '',
    date             INTEGER,
    size             INTEGER NOT NULL DEFAULT 0,
    has_attachments  INTEGER NOT NULL DEFAULT 0,
    snippet          TEXT NOT NULL DEFAULT '',
    is_read          INTEGER NOT NULL DEFAULT 0,
    is_flagged       INTEGER NOT NULL DEFAULT 0,
    -- The provider's raw flag values (IMAP system flags and keywords) as a JSON array.
    flags            TEXT NOT NULL DEFAULT '[]',
    -- Our tags (IMAP keywords, later Gmail label names) as a JSON array; mirrored into
    -- message_tags by triggers so tag: searches use an index.
    tags             TEXT NOT NULL DEFAULT '[]',
    UNIQUE (mailbox_id, uidvalidity, uid)
) STRICT;

CREATE INDEX messages_date ON messages(date);
CREATE INDEX messages_message_id ON messages(message_id);

CREATE TABLE message_tags (
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    tag         TEXT NOT NULL COLLATE NOCASE,
    PRIMARY KEY (message_id, tag)
) STRICT, WITHOUT ROWID;

CREATE INDEX message_tags_by_tag ON message_tags(tag);

-- Full-text index over subject, addresses, snippet and a prefix of the body text. Contentless:
-- the text lives in messages (or, for the body prefix, nowhere), the index only maps to rowids.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    subject, addresses, snippet, body,
    content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);

-- Maintained in SQL so one multi-row INSERT from the sync writes everything in one statement.
CREATE TRIGGER messages_tags_insert AFTER INSERT ON messages BEGIN
    INSERT OR IGNORE INTO message_tags(message_id, tag)
        SELECT new.id, value FROM json_each(new.tags);
END;

CREATE TRIGGER messages_tags_update AFTER UPDATE OF tags ON messages
WHEN old.tags IS NOT new.tags BEGIN
    DELETE FROM message_tags WHERE message_id = old.id;
    INSERT OR IGNORE INTO message_tags(message_id, tag)
        SELECT new.id, value FROM json_each(new.tags);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;
