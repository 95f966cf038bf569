-- Server-side rules. A rule manifest is what an assistant or a person proposed for one
-- account (a rule to install, or one of mailbroker's to remove), with the exact text the
-- server will be given and how many indexed messages match it today; a person approves it.
-- `account_rules` are mailbroker's rules now on each account's server; `rule_changes` keep,
-- for each journaled change of rules, what the server and that list were before, so an
-- undo puts both back.
CREATE TABLE rule_manifests (
    id            INTEGER PRIMARY KEY,
    account       TEXT NOT NULL,
    name          TEXT NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('install', 'remove')),
    rule          TEXT NOT NULL,
    provider_text TEXT NOT NULL,
    matches       INTEGER NOT NULL,
    backfill      INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'done', 'cancelled', 'failed')),
    origin        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    change_id     INTEGER
) STRICT;

CREATE TABLE account_rules (
    account  TEXT NOT NULL,
    name     TEXT NOT NULL,
    rule     TEXT NOT NULL,
    PRIMARY KEY (account, name)
) STRICT;

CREATE TABLE rule_changes (
    change_id     INTEGER PRIMARY KEY,
    account       TEXT NOT NULL,
    before        TEXT NOT NULL,
    rules_before  TEXT NOT NULL
) STRICT;
