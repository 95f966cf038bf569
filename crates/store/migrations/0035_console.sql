-- The console's single-use links (`mailbroker console link`, `console enroll`) and its sign-in
-- sessions, each kept as the SHA-256 digest of its secret: whoever reads the index cannot
-- present one. The passkeys a person enrolled (public keys only), and the WebAuthn ceremonies
-- in progress, each bound to its owner (a link's or a session's digest) and to one action.
CREATE TABLE console_links (
    digest      BLOB PRIMARY KEY,
    purpose     TEXT NOT NULL CHECK (purpose IN ('sign-in', 'enroll')),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;

CREATE TABLE console_sessions (
    digest      BLOB PRIMARY KEY,
    -- Every form of the session carries it; a post without it is refused.
    csrf        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE passkeys (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    -- The credential as the WebAuthn library keeps it (its public key and counter), JSON.
    credential    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER
) STRICT;

CREATE TABLE console_ceremonies (
    owner       BLOB NOT NULL,
    action      TEXT NOT NULL,
    state       TEXT NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (owner, action)
) STRICT;

-- A confirmation the person declined in the console: its write never runs, and the assistant
-- is told so (`confirmation_declined`).
ALTER TABLE approvals ADD COLUMN declined_at INTEGER;

-- Settings of the whole home that a person makes at a terminal (`console approvals`): who
-- may give a person's yes, and where the console is.
CREATE TABLE home_settings (
    name    TEXT PRIMARY KEY,
    value   TEXT NOT NULL,
    set_at  INTEGER NOT NULL,
    set_by  TEXT NOT NULL
) STRICT;
