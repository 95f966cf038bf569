-- A first sync indexes headers in one pass and the text (snippet, body prefix for full-text
-- search, attachments) in a second: the index is usable by headers sooner. A message whose
-- text is still to come is marked here; a sync cut short leaves the mark, and the next sync
-- fills the text in.
ALTER TABLE messages ADD COLUMN text_pending INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_text_pending ON messages(mailbox_id, uid) WHERE text_pending = 1;
