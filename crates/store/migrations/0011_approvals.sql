-- Confirmations a person gives outside the assistant's reach: an MCP dry run of a write that
-- needs confirmation records what it would do under a token; `mailbroker approve TOKEN` (the
-- person, at a terminal) approves it; the write then runs once with that token.
CREATE TABLE approvals (
    token        TEXT PRIMARY KEY,
    -- Digest of the tool, its arguments and the set of messages they resolve to.
    binding      TEXT NOT NULL,
    -- {tool, reason, plan, summary}: what the person is shown.
    description  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    approved_at  INTEGER,
    used_at      INTEGER
) STRICT;
