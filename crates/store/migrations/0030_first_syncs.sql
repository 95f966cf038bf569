-- First syncs (of accounts never synced) running now on the `serve` nodes of this index: a
-- first sync spends most of a provider's quota, so the nodes run only so many at once over
-- all of them. A claim goes with its node when the node leaves or is found dead.
CREATE TABLE first_syncs (
    account_id  TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    node_id     TEXT NOT NULL,
    started_at  INTEGER NOT NULL
) STRICT;
