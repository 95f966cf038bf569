-- A per-account fallback route, chosen by the person (`account set ID --fallback applescript
-- --mail-account NAME`): JSON {"provider", "settings"}, NULL when the account has none. It is
-- used only when the account's own route is unavailable.
ALTER TABLE accounts ADD COLUMN fallback TEXT;

-- The route that carried a message's change when it was not the account's own (NULL):
-- `applescript` for the Mail.app fallback.
ALTER TABLE change_items ADD COLUMN route TEXT;
