-- What the MCP servers of one index share, so a client may reach any of them.

-- Input requests (protocol 2026-07-28) answered, by nonce, for servers that share a key
-- (MAILBROKER_SECRET_KEY_FILE): any of them honours a request state that one of them issued,
-- and only once across all of them. Rows outlive their expiry only until the next answer.
CREATE TABLE input_answers (
    nonce       TEXT PRIMARY KEY,
    expires_at  INTEGER NOT NULL
) STRICT;

-- Streamable HTTP sessions (protocols before 2026-07-28): the client's initialize
-- parameters by session id, so a server that never saw the session restores it.
CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
