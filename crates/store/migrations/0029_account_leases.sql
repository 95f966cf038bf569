-- Who holds each account (a sync or a write) and who waits for it next, in the index rather
-- than in lock files beside it: every process that opens the index sees them, whichever
-- machine it runs on once the index can be shared. A holder keeps its lease by renewing it
-- (expires_at, milliseconds since the epoch); one that stops renewing, or whose process is
-- gone from its host, holds nothing. Each take adds one to `fence`, and a holder's writes
-- check it, so one that lost the account cannot write over its next holder.
CREATE TABLE account_leases (
    account_id         TEXT PRIMARY KEY,
    fence              INTEGER NOT NULL DEFAULT 0,
    holder             TEXT,
    holder_host        TEXT,
    holder_pid         INTEGER,
    expires_at         INTEGER,
    waiter             TEXT,
    waiter_host        TEXT,
    waiter_pid         INTEGER,
    waiter_expires_at  INTEGER
) STRICT;
