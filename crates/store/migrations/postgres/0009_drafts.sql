-- Drafts mailbroker saved: for each journaled change that saved one, where the provider put
-- it and the version it had then (`mailbroker_core::PlacedDraft` as JSON), so an undo
-- removes it only while it is unchanged.
CREATE TABLE draft_changes (
    change_id  BIGINT PRIMARY KEY,
    account    TEXT NOT NULL,
    placed     TEXT NOT NULL
);
