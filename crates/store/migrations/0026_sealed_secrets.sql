-- A secret may rest sealed in the index ('sealed': the secret column holds it encrypted with
-- a key kept outside the index, MAILBROKER_SECRET_KEY_FILE). SQLite cannot widen a CHECK in
-- place, so the table is copied into one that allows it.
CREATE TABLE credentials_sealable (
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    secret      TEXT NOT NULL,
    store       TEXT NOT NULL DEFAULT 'index' CHECK (store IN ('index', 'keyring', 'sealed')),
    PRIMARY KEY (account_id, kind)
) STRICT;
INSERT INTO credentials_sealable (account_id, kind, secret, store)
    SELECT account_id, kind, secret, store FROM credentials;
DROP TABLE credentials;
ALTER TABLE credentials_sealable RENAME TO credentials;
