-- A change's items share a few states: after adding one tag to 10,000 messages there is
-- typically one state before and one after, differing per message only in the UID. Each
-- distinct state (without its UID) is now stored once per change, and an item points to its
-- states and carries the UIDs. Journaling 10,000 messages then writes 10,000 short rows
-- instead of 20,000 JSON objects (about 2 MB through the WAL).
CREATE TABLE change_states (
    id          INTEGER PRIMARY KEY,
    change_id   INTEGER NOT NULL REFERENCES changes(id) ON DELETE CASCADE,
    -- {"mailbox", "uidvalidity", "read", "flagged", "tags"}
    state       TEXT NOT NULL,
    UNIQUE (change_id, state)
) STRICT;

INSERT INTO change_states (change_id, state)
    SELECT change_id, json_remove(before, '$.uid') FROM change_items
    UNION
    SELECT change_id, json_remove(after, '$.uid') FROM change_items WHERE after IS NOT NULL;

CREATE TABLE change_items_by_state (
    change_id     INTEGER NOT NULL REFERENCES changes(id) ON DELETE CASCADE,
    message_id    INTEGER NOT NULL,
    account_id    TEXT NOT NULL,
    outcome       TEXT NOT NULL,
    error_type    TEXT,
    error         TEXT,
    before_state  INTEGER NOT NULL REFERENCES change_states(id),
    before_uid    INTEGER NOT NULL,
    after_state   INTEGER REFERENCES change_states(id),
    after_uid     INTEGER,
    PRIMARY KEY (change_id, message_id)
) STRICT, WITHOUT ROWID;

INSERT INTO change_items_by_state
    SELECT i.change_id, i.message_id, i.account_id, i.outcome, i.error_type, i.error,
        b.id, json_extract(i.before, '$.uid'), a.id, json_extract(i.after, '$.uid')
    FROM change_items i
    JOIN change_states b ON b.change_id = i.change_id
        AND b.state = json_remove(i.before, '$.uid')
    LEFT JOIN change_states a ON a.change_id = i.change_id
        AND a.state = json_remove(i.after, '$.uid');

DROP TABLE change_items;
ALTER TABLE change_items_by_state RENAME TO change_items;
