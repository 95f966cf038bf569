-- The change journal: one row per write request, one item per message it touched. This is
-- ground truth of its own (what mailbroker did), not derived from the server.

CREATE TABLE changes (
    id          INTEGER PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    -- The selection as given: {"ids": [...]} or {"query": "..."}; for an undo, {"undo_of": N}.
    selection   TEXT NOT NULL,
    patch       TEXT NOT NULL,
    plan        TEXT NOT NULL,
    undo_of     INTEGER REFERENCES changes(id),
    applied     INTEGER NOT NULL DEFAULT 0,
    unchanged   INTEGER NOT NULL DEFAULT 0,
    stale       INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE change_items (
    change_id   INTEGER NOT NULL REFERENCES changes(id) ON DELETE CASCADE,
    message_id  INTEGER NOT NULL,
    account_id  TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    error_type  TEXT,
    error       TEXT,
    -- {"mailbox", "uidvalidity", "uid", "read", "flagged", "tags"} before and after.
    before      TEXT NOT NULL,
    after       TEXT,
    PRIMARY KEY (change_id, message_id)
) STRICT;
