-- A change's intent is journaled before anything is sent to a server: its row and an item per
-- message to change, each `unknown`, with status 'executing'. Its results replace those items
-- once the server was read back ('done'). An entry left 'executing' says what was (or may
-- have been) sent when its results could not be recorded: a full disk, a killed process.
ALTER TABLE changes ADD COLUMN status TEXT NOT NULL DEFAULT 'done'
    CHECK (status IN ('executing', 'done'));
