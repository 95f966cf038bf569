-- Where a mailbox's role came from: 'server' (IMAP SPECIAL-USE or INBOX, Gmail system labels)
-- or 'name' (a well-known top-level name, where the server marks no roles). Roles stored
-- before this are recomputed by the next sync.
ALTER TABLE mailboxes ADD COLUMN role_source TEXT CHECK (role_source IN ('server', 'name'));
