-- no-transaction
-- A message's identity on its provider becomes an opaque string (`RemoteId`), its change
-- marker another (`Version`), and a mailbox's sync position a third (`MailboxCursor`): the
-- index stops assuming IMAP's numbers, so a provider whose ids are strings (Graph) fits
-- without another change here. Rows convert as each adapter now spells them:
--   IMAP   id `UIDVALIDITY:UID`, version the modseq, cursor {"uidvalidity","uidnext","highestmodseq"};
--   Gmail  id the message id (16 hex digits; it was stored as their number), version and
--          cursor the history id.
-- A zero modseq or UIDVALIDITY meant "not known", which is now the empty string.
--
-- `messages` is rebuilt (its UNIQUE constraint names the old columns). Rebuilding a parent
-- table needs foreign keys off, or dropping it would cascade into message_state, message_tags
-- and message_text; so this migration runs its own transaction, with the pragma set outside
-- it, as SQLite's documented procedure for such changes does.
PRAGMA foreign_keys = OFF;
BEGIN;

CREATE TABLE messages_new (
    id               INTEGER PRIMARY KEY,
    mailbox_id       INTEGER NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    -- The provider's id for this copy (mailbroker_core::RemoteId), unique in its mailbox.
    remote_id        TEXT NOT NULL,
    message_id       TEXT,
    from_addr        TEXT NOT NULL DEFAULT '',
    to_addr          TEXT NOT NULL DEFAULT '',
    cc_addr          TEXT NOT NULL DEFAULT '',
    subject          TEXT NOT NULL DEFAULT '',
    date             INTEGER,
    size             INTEGER NOT NULL DEFAULT 0,
    has_attachments  INTEGER NOT NULL DEFAULT 0,
    text_pending     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (mailbox_id, remote_id)
) STRICT;

INSERT INTO messages_new (id, mailbox_id, remote_id, message_id, from_addr, to_addr, cc_addr,
                          subject, date, size, has_attachments, text_pending)
    SELECT m.id, m.mailbox_id,
           CASE a.provider WHEN 'gmail' THEN printf('%016x', m.uid)
                           ELSE m.uidvalidity || ':' || m.uid END,
           m.message_id, m.from_addr, m.to_addr, m.cc_addr, m.subject, m.date, m.size,
           m.has_attachments, m.text_pending
    FROM messages m
    JOIN mailboxes b ON b.id = m.mailbox_id
    JOIN accounts a ON a.id = b.account_id;

-- Not a deletion: no trigger fires, so the full-text rows (keyed by the unchanged ids) stay.
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;

CREATE INDEX messages_date ON messages(date);
CREATE INDEX messages_message_id ON messages(message_id);
CREATE INDEX messages_text_pending ON messages(mailbox_id) WHERE text_pending = 1;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END;

ALTER TABLE message_state ADD COLUMN version TEXT NOT NULL DEFAULT '';
UPDATE message_state SET version = CAST(modseq AS TEXT) WHERE modseq != 0;
ALTER TABLE message_state DROP COLUMN modseq;

ALTER TABLE mailboxes ADD COLUMN cursor TEXT NOT NULL DEFAULT '';
UPDATE mailboxes SET cursor =
    CASE (SELECT provider FROM accounts WHERE accounts.id = mailboxes.account_id)
        WHEN 'gmail' THEN CAST(highestmodseq AS TEXT)
        ELSE json_object('uidvalidity', uidvalidity, 'uidnext', uidnext,
                         'highestmodseq', highestmodseq)
    END
    WHERE uidvalidity != 0;
ALTER TABLE mailboxes DROP COLUMN uidvalidity;
ALTER TABLE mailboxes DROP COLUMN uidnext;
ALTER TABLE mailboxes DROP COLUMN highestmodseq;

ALTER TABLE manifest_items ADD COLUMN remote_id TEXT NOT NULL DEFAULT '';
UPDATE manifest_items SET remote_id =
    CASE (SELECT provider FROM accounts WHERE accounts.id = manifest_items.account_id)
        WHEN 'gmail' THEN printf('%016x', uid)
        ELSE uidvalidity || ':' || uid
    END;
ALTER TABLE manifest_items DROP COLUMN uidvalidity;
ALTER TABLE manifest_items DROP COLUMN uid;

ALTER TABLE deleted_messages ADD COLUMN remote_id TEXT NOT NULL DEFAULT '';
UPDATE deleted_messages SET remote_id =
    CASE (SELECT provider FROM accounts WHERE accounts.id = deleted_messages.account_id)
        WHEN 'gmail' THEN printf('%016x', uid)
        ELSE uidvalidity || ':' || uid
    END;
ALTER TABLE deleted_messages DROP COLUMN uidvalidity;
ALTER TABLE deleted_messages DROP COLUMN uid;

-- A journaled state's UIDVALIDITY (in change_states) joins its uid into the id; the key stays
-- in those rows, unread, since rows are shared by the items of a change.
ALTER TABLE change_items ADD COLUMN before_id TEXT NOT NULL DEFAULT '';
ALTER TABLE change_items ADD COLUMN after_id TEXT;
UPDATE change_items SET
    before_id = CASE (SELECT provider FROM accounts WHERE accounts.id = change_items.account_id)
        WHEN 'gmail' THEN printf('%016x', before_uid)
        ELSE (SELECT json_extract(state, '$.uidvalidity') FROM change_states
              WHERE change_states.id = change_items.before_state) || ':' || before_uid
    END,
    after_id = CASE
        WHEN after_uid IS NULL THEN NULL
        WHEN (SELECT provider FROM accounts WHERE accounts.id = change_items.account_id) = 'gmail'
            THEN printf('%016x', after_uid)
        ELSE (SELECT json_extract(state, '$.uidvalidity') FROM change_states
              WHERE change_states.id = change_items.after_state) || ':' || after_uid
    END;
ALTER TABLE change_items DROP COLUMN before_uid;
ALTER TABLE change_items DROP COLUMN after_uid;

COMMIT;
PRAGMA foreign_keys = ON;
