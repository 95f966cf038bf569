-- The console's single-use links (`mailbroker console link`) and its sign-in sessions, each
-- kept as the SHA-256 digest of its secret: whoever reads the index cannot present one.
CREATE TABLE console_links (
    digest      BYTEA PRIMARY KEY,
    purpose     TEXT NOT NULL CHECK (purpose IN ('sign-in')),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);

CREATE TABLE console_sessions (
    digest      BYTEA PRIMARY KEY,
    csrf        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
