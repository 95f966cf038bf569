-- A change left `executing` by a process that is gone (killed, or stalled past its account's
-- lease) is marked `interrupted`: nothing more will be recorded for it, and its unknown
-- items are settled by a sync or a rerun. `holders` names the account lease holders it
-- wrote under (a JSON list), by which it is told from one whose process still runs.
ALTER TABLE changes ADD COLUMN holders TEXT;
ALTER TABLE changes DROP CONSTRAINT changes_status_check;
ALTER TABLE changes ADD CONSTRAINT changes_status_check
    CHECK (status IN ('executing', 'done', 'interrupted'));
