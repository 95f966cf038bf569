-- The provider's own id of a mailbox where its name is not one (a Graph folder id), so a
-- write names its folders without listing the account's folder tree. NULL where the name is
-- the id (IMAP, Gmail's places, Mail.app paths), and until the next sync fills it in.
ALTER TABLE mailboxes ADD COLUMN remote_id TEXT;
