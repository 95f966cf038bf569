-- The conversation a message belongs to, for `thread:`: a short hash of the provider's
-- thread id (Gmail threadId, Graph conversationId, JMAP threadId) or, on IMAP, of the
-- Message-ID that starts it (`store::thread_id`). NULL: indexed before this column existed,
-- or a message without any id to go by.
ALTER TABLE messages ADD COLUMN thread_id TEXT;
CREATE INDEX messages_thread ON messages(thread_id) WHERE thread_id IS NOT NULL;
