-- A person's choice, made at a terminal, that `delete-staged ID --yes` may delete this
-- account's mail for good without anyone answering (cron): when it was made, NULL when not.
ALTER TABLE accounts ADD COLUMN unattended_deletions_since INTEGER;

-- The journal of account settings a person changed that widen what runs without them. It
-- outlives the account, as the change journal does.
CREATE TABLE account_settings_log (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    setting TEXT NOT NULL,
    value TEXT NOT NULL,
    origin TEXT NOT NULL
);

-- The journal's `unknown` items, found by message when a later write or a sync shows how
-- they ended (`store/settle.rs`). Few rows: most changes have none.
CREATE INDEX change_items_unknown ON change_items (message_id) WHERE outcome = 'unknown';
