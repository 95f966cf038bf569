-- The console's single-use links (`mailbroker console link`) and its sign-in sessions, each
-- kept as the SHA-256 digest of its secret: whoever reads the index cannot present one.
CREATE TABLE console_links (
    digest      BLOB PRIMARY KEY,
    purpose     TEXT NOT NULL CHECK (purpose IN ('sign-in')),
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
