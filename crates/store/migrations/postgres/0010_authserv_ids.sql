-- The authserv-ids whose Authentication-Results an account trusts (its own provider's, as
-- `account set ID --authserv-id` names them), as a JSON array; empty: the provider's default.
ALTER TABLE accounts ADD COLUMN authserv_ids TEXT NOT NULL DEFAULT '[]';
