-- Bearer tokens for MCP over HTTP that open only some accounts (`mailbroker token create`).
-- The token itself is shown once and never stored: only its SHA-256 digest, so a copy of the
-- index does not let anyone in. A token is 256 random bits, so a fast digest is enough.
CREATE TABLE access_tokens (
    name          TEXT PRIMARY KEY,
    digest        BLOB NOT NULL UNIQUE,
    -- The account ids it opens, as a JSON array (at least one).
    accounts      TEXT NOT NULL,
    allow_writes  INTEGER NOT NULL CHECK (allow_writes IN (0, 1)),
    created_at    INTEGER NOT NULL
) STRICT;
