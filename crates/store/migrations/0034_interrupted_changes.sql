-- A change left `executing` by a process that is gone (killed, or stalled past its account's
-- lease) is marked `interrupted`: nothing more will be recorded for it, and its unknown
-- items are settled by a sync or a rerun. `holders` names the account lease holders it
-- wrote under (a JSON list), by which it is told from one whose process still runs.
ALTER TABLE changes ADD COLUMN holders TEXT;
-- The status's CHECK belongs to its column, which SQLite cannot alter: a new column takes
-- its place.
ALTER TABLE changes ADD COLUMN run_status TEXT NOT NULL DEFAULT 'done'
    CHECK (run_status IN ('executing', 'done', 'interrupted'));
UPDATE changes SET run_status = status;
ALTER TABLE changes DROP COLUMN status;
ALTER TABLE changes RENAME COLUMN run_status TO status;
