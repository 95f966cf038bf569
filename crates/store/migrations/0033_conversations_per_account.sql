-- A conversation is one account's, and one read from headers holds only the messages whose
-- subjects match. A thread id is now a hash of the account, of the old id (the hash of the
-- thread key) and, for IMAP, of the subject; SQL has no SHA-256, so the store rewrites the
-- old ids once, when it finds this marker (store::rethread), and removes it.
CREATE TABLE rethread_pending (pending INTEGER NOT NULL);
INSERT INTO rethread_pending (pending) VALUES (1);
