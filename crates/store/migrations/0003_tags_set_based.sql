-- message_tags is now maintained by the store with set-based statements (one DELETE and one
-- INSERT … json_each per 500 messages): the per-row triggers made a 10,000-message index
-- update six times slower.
DROP TRIGGER messages_tags_insert;
DROP TRIGGER messages_tags_update;
