-- What each `serve` node says of itself (its URL and each account's freshness, as JSON), and
-- the takeover time it runs with: `serve status` reads both from the index, on any machine
-- that reaches it, where it read one file per process in the home before.
ALTER TABLE serve_nodes ADD COLUMN takeover_ms INTEGER NOT NULL DEFAULT 30000;
ALTER TABLE serve_nodes ADD COLUMN status TEXT NOT NULL DEFAULT '{}';
