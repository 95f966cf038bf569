-- `serve` processes of one index (nodes) and which of them watches each account. A node
-- beats (heartbeat_at, milliseconds since the epoch) while it runs; one that has not beaten
-- for the takeover time, or whose process is gone from its host, is dead, and its accounts
-- go to the live ones. Each account has at most one watcher.
CREATE TABLE serve_nodes (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE account_watchers (
    account_id  TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    node_id     TEXT NOT NULL,
    since       INTEGER NOT NULL
) STRICT;
