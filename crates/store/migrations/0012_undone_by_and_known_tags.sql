-- A change shows the change that undid it (`undone_by`), and a second undo of it is refused:
-- both look up changes by the change they undo.
CREATE INDEX changes_undo_of ON changes(undo_of);

-- Tags mailbroker has added or removed in an account. A tag no message carries any more (its
-- last use undone, say) is still the account's: the next add_tags of it is no typo.
CREATE TABLE known_tags (
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    tag         TEXT NOT NULL,
    PRIMARY KEY (account_id, tag)
) STRICT, WITHOUT ROWID;
