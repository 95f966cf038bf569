-- Where a secret rests: 'index' (the secret column holds it) or 'keyring' (the OS keyring
-- holds it; the secret column holds the name of its entry there).
ALTER TABLE credentials ADD COLUMN store TEXT NOT NULL DEFAULT 'index'
    CHECK (store IN ('index', 'keyring'));
