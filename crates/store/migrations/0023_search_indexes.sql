-- Terms a search answers from an index rather than a scan of every message: a size range
-- (`larger:`/`smaller:`) and attachment presence (`has:attachment`: the few that have one,
-- in date order as a page wants them). `scripts/bench search` measured both (BENCHMARKS.md);
-- a partial index of unread state rows was measured too and made `is:unread in:inbox`
-- slower (the planner walked it and looked up every message), so there is none.
CREATE INDEX messages_size ON messages(size);
CREATE INDEX messages_attached ON messages(date) WHERE has_attachments = 1;
