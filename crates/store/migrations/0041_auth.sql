-- The verdict of the account's own server on each message (`pass`, `fail`, `none`; NULL
-- before this step or from a provider that does not read it), for `auth:`.
ALTER TABLE messages ADD COLUMN auth TEXT;
