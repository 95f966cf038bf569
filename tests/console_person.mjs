// A person given the console's page of a waiting write (the URL an MCP client opened for
// them): not signed in on this browser, they sign in with their passkey, read the request,
// and approve or decline it with their passkey. Prints what happened as one JSON line.
// Usage: node console_person.mjs CONFIG_JSON
//   CONFIG_JSON: { "url": the page, "decide": "approve" | "decline" | an action,
//                  "credentials": [passkey], "match": text of its card on a list (or none),
//                  "shots": dir, "shot": name, "chromium": path }
import { authenticator, session } from "./console_launch.mjs";

await session(async ({ browser, context, page, config, out }) => {
  const passkey = await authenticator(context, page, config.credentials);
  const first = await page.goto(config.url);
  out.signed_out_status = first ? first.status() : null;
  await Promise.all([
    page.waitForSelector("section.card", { timeout: 15000 }),
    page.click("form[data-passkey=sign-in] button"),
  ]).catch(async (e) => {
    throw new Error(`${e.message}\nthe page said: ${await page.locator("main").innerText()}`);
  });
  out.url = page.url();
  out.text = await page.locator("main").innerText();
  await page.screenshot({ path: `${config.shots}/${config.shot}.png` });
  // "approve" or "decline" the request's; or a whole action, such as "approvals:person".
  const action = config.decide.includes(":") ? config.decide : `${config.decide}:`;
  // On the list, the card of this request (`match`, a text it shows).
  const card = config.match ? page.locator("section.card", { hasText: config.match }) : page;
  const form = card.locator(`form[data-action^="${action}"]`);
  out.action = await form.getAttribute("data-action");
  await form.locator("button").click();
  await form.locator("output.done, output.error").waitFor({ timeout: 15000 });
  out.decided = await form.locator("output").innerText();
  await page.reload();
  out.after = await page.locator("main").innerText();
  out.credentials = await passkey.credentials();
});
