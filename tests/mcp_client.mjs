// Drives `mailbroker mcp` with the official TypeScript MCP SDK (the base of the MCP
// Inspector and many clients). That SDK validates every result's structured content against
// the tool's output schema, error results included, and throws where they do not match.
//
// Usage: node mcp_client.mjs CONFIG_JSON
// CONFIG: {"transport": "stdio"|"http", "bin", "home", "url", "token", "account",
//          "subjects": [accept, decline, refused, undone], "error_types": [every SPEC one],
//          "readonly_url" (http only: a listener without write tools)}
// Prints one JSON line with what each call came back as; the caller checks it and the
// IMAP server.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { spawnSync } from "node:child_process";

const cfg = JSON.parse(process.argv[2]);

function transport() {
  if (cfg.transport === "stdio") {
    return new StdioClientTransport({
      command: cfg.bin,
      args: ["--home", cfg.home, "mcp"],
      env: { ...process.env, MAILBROKER_SECRET_STORE: "index" },
    });
  }
  return new StreamableHTTPClientTransport(new URL(cfg.url), {
    requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } },
  });
}

// A client that answers elicitations with `answer` ("accept", "decline"), or declares none.
async function connect(answer) {
  const capabilities = answer ? { elicitation: {} } : {};
  const client = new Client({ name: "ts-test", version: "1" }, { capabilities });
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async () =>
      answer === "accept" ? { action: "accept", content: { confirm: true } } : { action: answer },
    );
  }
  await client.connect(transport());
  await client.listTools(); // the SDK validates results against these schemas
  return client;
}

// A call as the SDK returns it, or what it threw.
async function call(client, name, args) {
  try {
    const r = await client.callTool({ name, arguments: args });
    return { isError: r.isError === true, body: r.structuredContent ?? null };
  } catch (e) {
    return { thrown: String(e && e.message ? e.message : e) };
  }
}

async function idOf(client, subject) {
  const found = await call(client, "search_messages", { query: `subject:"${subject}" in:inbox` });
  const hit = (found.body?.messages ?? []).find((m) => m.subject === subject);
  return hit ? hit.id : -1;
}

const seen = {};
const [accept, decline, refused, undone] = cfg.subjects;

let client = await connect("accept");
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
// Every error_type's result shape is valid against every tool's output schema, by the
// validator this SDK applies to results.
seen.schema_rejects = [];
for (const name of seen.tools) {
  const validate = client.getToolOutputValidator(name);
  for (const type of cfg.error_types) {
    const body = { success: false, error: "e", error_type: type, next_step: "n" };
    const r = validate(body);
    if (!r.valid) seen.schema_rejects.push(`${name}/${type}: ${r.errorMessage}`);
  }
}
seen.accounts = await call(client, "list_accounts", {});
seen.mailboxes = await call(client, "list_mailboxes", { account: cfg.account });
seen.search = await call(client, "search_messages", { query: "in:inbox", limit: 3 });
seen.read = await call(client, "get_messages", { ids: [await idOf(client, undone)] });
seen.sync = await call(client, "sync_accounts", { account: cfg.account });
seen.validation = await call(client, "search_messages", { query: "is:bogus" });
seen.wrong_type = await call(client, "get_messages", { ids: "three" });
seen.unsupported = await call(client, "search_messages", { query: "subject:(a b)" });
seen.not_found = await call(client, "get_messages", { ids: [999999] });
seen.unknown_account = await call(client, "search_messages", { query: "x", account: "nobody" });
seen.unknown_field = await call(client, "update_message", { ids: [1], flagged: true, dryRun: true });
seen.unavailable = await call(client, "sync_accounts", { account: "gone" });
seen.auth = await call(client, "sync_accounts", { account: "locked" });
// A small write, its journal entry, its undo, and a second undo.
const toRead = seen.read.body?.messages?.[0] ?? { id: -1, flags: [] };
seen.flagged = await call(client, "update_message", {
  ids: [toRead.id],
  flagged: !toRead.flags.includes("flagged"),
});
const change = seen.flagged.body?.change_id;
seen.undo = await call(client, "undo_change", { change_id: change });
seen.undo_again = await call(client, "undo_change", { change_id: change });
seen.changes = await call(client, "list_changes", { id: change });
// Confirmation by the person, through elicitation: the plan in words first.
const acceptId = await idOf(client, accept);
seen.dry_run = await call(client, "update_message", { ids: [acceptId], move_to: "trash", dry_run: true });
seen.accepted = await call(client, "update_message", { ids: [acceptId], move_to: "trash" });
await client.close();

client = await connect("decline");
seen.declined = await call(client, "update_message", { ids: [await idOf(client, decline)], move_to: "trash" });
await client.close();

// No elicitation: refused; the dry run's token works only once the person approved it.
client = await connect(null);
const request = { ids: [await idOf(client, refused)], move_to: "trash" };
seen.refused = await call(client, "update_message", request);
const dry = await call(client, "update_message", { ...request, dry_run: true });
const token = dry.body?.confirm_token;
seen.unapproved = await call(client, "update_message", { ...request, confirm_token: token });
// A shell the assistant runs has no terminal: --yes does not approve. The person, at a
// terminal (util-linux script makes one), does.
const shell = spawnSync("setsid", ["--wait", cfg.bin, "--home", cfg.home, "approve", token, "--yes"], { encoding: "utf8" });
seen.shell_approve_status = shell.status;
const quote = (a) => `'${String(a).replaceAll("'", "'\\''")}'`;
const command = [cfg.bin, "--home", cfg.home, "approve", token].map(quote).join(" ");
const approve = spawnSync("script", ["--quiet", "--return", "--command", command, "/dev/null"], { input: "y\n", encoding: "utf8" });
seen.approve_status = approve.status;
seen.approved = await call(client, "update_message", { ...request, confirm_token: token });
await client.close();

if (cfg.readonly_url) {
  const readonly = new Client({ name: "ts-test", version: "1" }, { capabilities: {} });
  await readonly.connect(
    new StreamableHTTPClientTransport(new URL(cfg.readonly_url), {
      requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } },
    }),
  );
  seen.readonly_tools = (await readonly.listTools()).tools.map((t) => t.name).sort();
  seen.writes_disabled = await call(readonly, "update_message", { ids: [1], flagged: true });
  await readonly.close();
}

console.log(JSON.stringify(seen));
