-- The mailing list a message came from (`list_of` in the core: the List-Id, else the host
-- its List-Unsubscribe leads to), for `list:` and `is:list`. NULL: from no list, or indexed
-- before this column existed.
ALTER TABLE messages ADD COLUMN list_id TEXT;
CREATE INDEX messages_list ON messages(list_id) WHERE list_id IS NOT NULL;
