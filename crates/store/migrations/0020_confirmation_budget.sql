-- Messages changed through MCP without a person's confirmation, per account and call: the
-- confirmation budget (`store/budget.rs`) sums the rows of a window, across sessions and
-- processes. Rows older than a day are pruned as new ones come.
CREATE TABLE unconfirmed_writes (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    messages INTEGER NOT NULL
);
CREATE INDEX unconfirmed_writes_by_account ON unconfirmed_writes (account_id, at);
