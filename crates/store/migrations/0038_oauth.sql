-- mailbroker as its own OAuth authorization server for hosted MCP clients. A client is
-- registered (RFC 7591) or known by its client id metadata document (an https URL); an
-- authorization request waits for the person's consent in the console; a grant is what the
-- person approved (accounts, read or read-write) for one client; its codes and tokens are
-- kept only as SHA-256 digests. A grant ends when revoked; its tokens with it.
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('registered', 'document')),
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    fetched_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE oauth_requests (
    id             TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    state          TEXT,
    code_challenge TEXT NOT NULL,
    resource       TEXT NOT NULL,
    created_at     INTEGER NOT NULL
) STRICT;

CREATE TABLE oauth_grants (
    id            INTEGER PRIMARY KEY,
    client_id     TEXT NOT NULL,
    accounts      TEXT NOT NULL,
    allow_writes  INTEGER NOT NULL CHECK (allow_writes IN (0, 1)),
    resource      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER
) STRICT;

CREATE TABLE oauth_codes (
    digest         BLOB PRIMARY KEY,
    grant_id       INTEGER NOT NULL,
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at     INTEGER NOT NULL,
    used           INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE oauth_tokens (
    digest      BLOB PRIMARY KEY,
    grant_id    INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at  INTEGER NOT NULL,
    used        INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);
