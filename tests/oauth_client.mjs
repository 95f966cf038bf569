// A hosted assistant's client connecting to `mailbroker serve` by OAuth, as the official
// TypeScript SDK does it (`StreamableHTTPClientTransport` with an `OAuthClientProvider`):
// discovery from the 401, registration (Dynamic Client Registration, or a client id metadata
// document when `config.cimd` names one), the person's consent in the console in Debian's
// Chromium with a virtual authenticator as their passkey, the code exchanged with its PKCE
// verifier, tools called with the token, and a refresh. Then what must be refused, by hand:
// a code with a wrong verifier, a code presented twice. Prints what happened as one JSON line.
// Usage: node oauth_client.mjs CONFIG_JSON
//   CONFIG_JSON: { "mcp": url, "enroll": link, "chromium": path, "redirect": url,
//                  "account": id, "mode": "r"|"rw", "cimd": url?, "revoke_in_console": bool?,
//                  "shots": dir }
import { createHash, randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError, auth } from "@modelcontextprotocol/sdk/client/auth.js";
import { authenticator, session } from "./console_launch.mjs";
import { consenting, enroll } from "./oauth_browser.mjs";

await session(async ({ context, page, config, out }) => {
  await authenticator(context, page);
  await enroll(page, config.enroll);
  const consent = await consenting(page, config);

  const stored = {};
  const provider = {
    get redirectUrl() { return config.redirect; },
    get clientMetadata() {
      return { client_name: "Test assistant", redirect_uris: [config.redirect],
        grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
        token_endpoint_auth_method: "none" };
    },
    clientMetadataUrl: config.cimd,
    state: () => "state-123",
    clientInformation: () => stored.client,
    saveClientInformation: (c) => { stored.client = c; },
    tokens: () => stored.tokens,
    saveTokens: (t) => { stored.tokens = t; },
    redirectToAuthorization: (url) => { stored.authorize = url; },
    saveCodeVerifier: (v) => { stored.verifier = v; },
    codeVerifier: () => stored.verifier,
  };
  const mcp = new URL(config.mcp);
  const connected = async () => {
    const client = new Client({ name: "oauth-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(mcp, { authProvider: provider }));
    return client;
  };

  // No token: the SDK discovers, registers and sends the person to the consent page.
  const first = new StreamableHTTPClientTransport(mcp, { authProvider: provider });
  try {
    await new Client({ name: "oauth-test", version: "1.0.0" }).connect(first);
    throw new Error("connected without a token");
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  out.client_id = stored.client.client_id;
  out.authorize = stored.authorize.href;
  const given = await consent(stored.authorize.href, "20-oauth-consent.png");
  out.consent = given.text;
  out.state = given.back.searchParams.get("state");
  out.iss = given.back.searchParams.get("iss");
  await first.finishAuth(given.back.searchParams.get("code"));
  out.first = { ...stored.tokens };

  const client = await connected();
  out.search = (await client.callTool({ name: "search_messages", arguments: { query: "zebra", limit: 50 } })).structuredContent;
  await client.close();
  out.refreshed = await auth(provider, { serverUrl: mcp });
  out.second = { ...stored.tokens };
  const again = await connected();
  out.after_refresh = (await again.callTool({ name: "list_mailboxes", arguments: {} })).structuredContent;
  await again.close();

  // By hand: a code with a wrong verifier, then presented again; a good code presented twice.
  const meta = await (await fetch(new URL("/.well-known/oauth-authorization-server", mcp))).json();
  const pkce = () => {
    const verifier = randomBytes(32).toString("base64url");
    return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
  };
  const code = async (challenge) => {
    const url = new URL(meta.authorization_endpoint);
    for (const [k, v] of Object.entries({ response_type: "code", client_id: out.client_id,
      redirect_uri: config.redirect, code_challenge: challenge, code_challenge_method: "S256",
      state: "s2", resource: mcp.href })) url.searchParams.set(k, v);
    return (await consent(url.href)).back.searchParams.get("code");
  };
  const exchange = async (c, verifier) => {
    const r = await fetch(meta.token_endpoint, { method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: c, code_verifier: verifier,
        client_id: out.client_id, redirect_uri: config.redirect, resource: mcp.href }) });
    return { status: r.status, body: await r.json() };
  };
  const a = pkce();
  const spent = await code(a.challenge);
  out.wrong_verifier = await exchange(spent, pkce().verifier);
  out.after_wrong = await exchange(spent, a.verifier);
  const b = pkce();
  const good = await code(b.challenge);
  out.exchanged = await exchange(good, b.verifier);
  out.replayed = await exchange(good, b.verifier);

  // The person ends the grant from the console, with the passkey.
  if (config.revoke_in_console) {
    await page.goto(new URL("/console/accounts", mcp).href);
    const form = page.locator('form[data-action^="revoke-grant:"]').first();
    out.revoked_grant = await form.getAttribute("data-action");
    await form.locator("button").click();
    await form.locator("output.done, output.error").waitFor({ timeout: 15000 });
    out.revoked = await form.locator("output").innerText();
  }
});
