-- A change's messages whose write was sent but whose answer never came are counted apart from
-- the ones that failed: they may have changed on the server. They were counted as failed;
-- an existing change's count is split by its items' outcomes.
ALTER TABLE changes ADD COLUMN unknown INTEGER NOT NULL DEFAULT 0;
UPDATE changes SET unknown = (
    SELECT count(*) FROM change_items ci WHERE ci.change_id = changes.id AND ci.outcome = 'unknown'
);
UPDATE changes SET failed = CASE WHEN failed > unknown THEN failed - unknown ELSE 0 END;
