-- Staged deletions (SPEC §5): a manifest records what a person is asked to delete; only
-- `mailbroker delete-staged` executes it, checkpointing item statuses after every batch.

CREATE TABLE manifests (
    id           INTEGER PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    origin       TEXT NOT NULL,
    -- As given: {"query": "..."} or {"ids": [...]}.
    selection    TEXT NOT NULL,
    mode         TEXT NOT NULL CHECK (mode IN ('trash', 'permanent')),
    -- {count, bytes, first_date, last_date, top_senders, accounts, mailboxes} at staging.
    summary      TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'executing', 'done', 'failed', 'cancelled')),
    updated_at   INTEGER NOT NULL,
    executed_at  INTEGER
) STRICT;

-- Each item's identity is copied here at staging: execution needs no index row, and a sync
-- that drops a row meanwhile changes nothing about what is deleted.
CREATE TABLE manifest_items (
    manifest_id  INTEGER NOT NULL REFERENCES manifests(id) ON DELETE CASCADE,
    message_id   INTEGER NOT NULL,
    account_id   TEXT NOT NULL,
    mailbox      TEXT NOT NULL,
    uidvalidity  INTEGER NOT NULL,
    uid          INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'done', 'skipped', 'failed')),
    error        TEXT,
    PRIMARY KEY (manifest_id, message_id)
) STRICT;

CREATE INDEX manifest_items_pending ON manifest_items(manifest_id, status);

-- Metadata of messages deleted for good, so journals and manifests stay readable.
CREATE TABLE deleted_messages (
    id           INTEGER PRIMARY KEY,
    account_id   TEXT NOT NULL,
    mailbox      TEXT NOT NULL,
    uidvalidity  INTEGER NOT NULL,
    uid          INTEGER NOT NULL,
    message_id   TEXT,
    from_addr    TEXT NOT NULL,
    subject      TEXT NOT NULL,
    date         INTEGER,
    size         INTEGER NOT NULL,
    deleted_at   INTEGER NOT NULL,
    manifest_id  INTEGER REFERENCES manifests(id)
) STRICT;
