-- Every term of the query language answered from an index rather than a scan of messages.

-- Senders, recipients and subjects as words: `from:alice` reads a posting list instead of
-- testing every row with LIKE. External content: the words come from the messages table, so
-- the index holds no second copy of the text, and 'rebuild' fills it from the rows an older
-- index already has. No column sizes: they serve ranking, and results are ordered by date.
CREATE VIRTUAL TABLE message_headers USING fts5(
    from_addr, to_addr, cc_addr, subject,
    content = 'messages', content_rowid = 'id', columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- A message's headers are indexed with its text: in the second pass of an IMAP first sync
-- (`text_pending` turns 0), with the message itself elsewhere. The index holds exactly the
-- messages whose text_pending is 0, so the first pass writes no index and stays as fast as it
-- was; until a message's text is in, header terms match it by substring (store/query.rs).
INSERT INTO message_headers (message_headers) VALUES ('rebuild');
INSERT INTO message_headers (message_headers, rowid, from_addr, to_addr, cc_addr, subject)
    SELECT 'delete', id, from_addr, to_addr, cc_addr, subject FROM messages WHERE text_pending = 1;

CREATE TRIGGER message_headers_insert AFTER INSERT ON messages WHEN new.text_pending = 0 BEGIN
    INSERT INTO message_headers (rowid, from_addr, to_addr, cc_addr, subject)
        VALUES (new.id, new.from_addr, new.to_addr, new.cc_addr, new.subject);
END;

CREATE TRIGGER message_headers_text_in AFTER UPDATE OF text_pending ON messages
WHEN old.text_pending = 1 AND new.text_pending = 0 BEGIN
    INSERT INTO message_headers (rowid, from_addr, to_addr, cc_addr, subject)
        VALUES (new.id, new.from_addr, new.to_addr, new.cc_addr, new.subject);
END;

CREATE TRIGGER message_headers_text_out AFTER UPDATE OF text_pending ON messages
WHEN old.text_pending = 0 AND new.text_pending = 1 BEGIN
    INSERT INTO message_headers (message_headers, rowid, from_addr, to_addr, cc_addr, subject)
        VALUES ('delete', old.id, old.from_addr, old.to_addr, old.cc_addr, old.subject);
END;

CREATE TRIGGER message_headers_delete AFTER DELETE ON messages WHEN old.text_pending = 0 BEGIN
    INSERT INTO message_headers (message_headers, rowid, from_addr, to_addr, cc_addr, subject)
        VALUES ('delete', old.id, old.from_addr, old.to_addr, old.cc_addr, old.subject);
END;

CREATE TRIGGER message_headers_update AFTER UPDATE OF from_addr, to_addr, cc_addr, subject
ON messages WHEN old.text_pending = 0 AND new.text_pending = 0 BEGIN
    INSERT INTO message_headers (message_headers, rowid, from_addr, to_addr, cc_addr, subject)
        VALUES ('delete', old.id, old.from_addr, old.to_addr, old.cc_addr, old.subject);
    INSERT INTO message_headers (rowid, from_addr, to_addr, cc_addr, subject)
        VALUES (new.id, new.from_addr, new.to_addr, new.cc_addr, new.subject);
END;

-- A message's state beside its mailbox, so `is:unread in:inbox` is counted from one index
-- range instead of a lookup per message. The sync writes it with the state row; a move
-- carries it along here.
ALTER TABLE message_state ADD COLUMN mailbox_id INTEGER;

UPDATE message_state SET mailbox_id = (SELECT m.mailbox_id FROM messages m WHERE m.id = message_state.id);

CREATE INDEX message_state_by_mailbox ON message_state(mailbox_id, is_read, is_flagged);

CREATE TRIGGER message_state_follows_moves AFTER UPDATE OF mailbox_id ON messages
WHEN old.mailbox_id IS NOT new.mailbox_id BEGIN
    UPDATE message_state SET mailbox_id = new.mailbox_id WHERE id = new.id;
END;

-- Messages with an attachment by mailbox and date: `account:x has:attachment` is counted
-- from this index alone.
DROP INDEX messages_attached;
CREATE INDEX messages_attached ON messages(mailbox_id, date) WHERE has_attachments = 1;
