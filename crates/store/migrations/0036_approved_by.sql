-- Who gave a confirmation its yes: `terminal` (`mailbroker approve`) or `passkey` (the
-- console). Where only a passkey approves (`--approvals passkey` on the server that runs the
-- write), a yes given at a terminal does not run it.
ALTER TABLE approvals ADD COLUMN approved_by TEXT;
