// Drives `mailbroker mcp` with the official TypeScript MCP SDK (the base of the MCP
// Inspector and many clients). That SDK validates every result's structured content against
// the tool's output schema, error results included, and throws where they do not match.
//
// Usage: node mcp_client.mjs CONFIG_JSON
// CONFIG: {"transport": "stdio"|"http", "bin", "home", "url", "token",
//          "subjects": [accept, decline, refused]}
// Prints one JSON line with what each call came back as; the caller checks it and the
// IMAP server.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

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
const [accept, decline, refused] = cfg.subjects;

let client = await connect("accept");
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
seen.search = await call(client, "search_messages", { query: "in:inbox", limit: 3 });
seen.validation = await call(client, "search_messages", { query: "is:bogus" });
seen.not_found = await call(client, "get_messages", { ids: [999999] });
seen.unknown_field = await call(client, "update_message", { ids: [1], flagged: true, dryRun: true });
seen.accepted = await call(client, "update_message", { ids: [await idOf(client, accept)], move_to: "trash" });
await client.close();

client = await connect("decline");
seen.declined = await call(client, "update_message", { ids: [await idOf(client, decline)], move_to: "trash" });
await client.close();

client = await connect(null);
seen.refused = await call(client, "update_message", { ids: [await idOf(client, refused)], move_to: "trash" });
await client.close();

console.log(JSON.stringify(seen));
