// A person with a passkey in the console, in Debian's Chromium driven by playwright-core:
// the browser's virtual authenticator (CTAP2, user verification) is the passkey. Enrolls from
// the printed link, approves one waiting write and declines another by the page's buttons,
// runs a staged deletion and undoes that run, then tries what must be refused. Prints what
// happened (and the passkey, for the next script) as one JSON line.
// Usage: node console_passkey.mjs CONFIG_JSON
//   CONFIG_JSON: { "enroll": link, "approve": token, "decline": token, "other": token,
//                  "manifest": staged deletion id, "shots": dir, "chromium": path }
import { authenticator, session } from "./console_launch.mjs";

await session(async ({ browser, context, page, config, out }) => {
  const passkey = await authenticator(context, page);

  await page.goto(config.enroll);
  await page.screenshot({ path: `${config.shots}/10-console-enroll.png` });
  await page.fill("input[name=name]", "test laptop");
  await Promise.all([
    page.waitForURL((url) => url.pathname === "/console", { timeout: 15000 }),
    page.click("form[data-passkey=enroll] button"),
  ]);
  out.enrolled_at = page.url();

  const decide = async (action) => {
    const form = page.locator(`form[data-action="${action}"]`);
    await form.locator("button").click();
    await form.locator("output.done, output.error").waitFor({ timeout: 15000 });
    return form.locator("output").innerText();
  };
  out.approved = await decide(`approve:${config.approve}`);
  out.declined = await decide(`decline:${config.decline}`);
  await page.screenshot({ path: `${config.shots}/11-console-decided.png` });

  // A staged deletion run from its page, then that run undone from the journal's.
  // The run goes on in the server; its page follows it (reloading itself) to its report.
  await page.goto(new URL(`/console/deletions/${config.manifest}`, config.enroll).href);
  await page.locator(`form[data-action="run:${config.manifest}"] button`).click();
  const ended = () => document.querySelector("section.report") && !document.querySelector("section.running");
  for (let waited = 0; ; waited += 250) {
    if (await page.evaluate(ended).catch(() => false)) break;
    if (waited > 30000) throw new Error("the run's page never showed its report");
    await page.waitForTimeout(250);
  }
  out.ran = await page.locator("section.report li").first().innerText();
  out.run_status = await page.locator("dl.facts dd").first().innerText();
  await page.screenshot({ path: `${config.shots}/12-console-ran.png` });
  const ran = /change (\d+)/.exec(out.ran);
  out.run_change = ran ? Number(ran[1]) : null;
  await page.goto(new URL(`/console/journal/${out.run_change}`, config.enroll).href);
  out.undone = await decide(`undo:${out.run_change}`);
  await page.screenshot({ path: `${config.shots}/13-console-undone.png` });

  // What must be refused: a post with the session but no passkey, and an assertion made for
  // one action presented for another.
  out.refused = await page.evaluate(async ({ token, approved }) => {
    const csrf = document.querySelector("input[name=csrf]").value;
    const post = async (url, body) => {
      const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) });
      return { status: r.status, body: await r.json().catch(() => null) };
    };
    const plain = await post("/console/act", { action: `approve:${token}`, csrf });
    const asked = await post("/console/act/options", { action: `approve:${token}`, csrf });
    await post("/console/act/options", { action: `decline:${token}`, csrf });
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(asked.body.options.publicKey);
    const credential = (await navigator.credentials.get({ publicKey })).toJSON();
    const other = await post("/console/act", { action: `decline:${token}`, csrf, credential });
    const wrongForm = await post("/console/act", { action: `approve:${token}`, csrf: "0000", credential });
    // Decided already: the passkey is not even asked.
    const stale = await post("/console/act/options", { action: `approve:${approved}`, csrf });
    return { plain, other, wrong_form: wrongForm, stale };
  }, { token: config.other, approved: config.approve });

  // The passkey, for the person's next visit in another browser.
  out.credentials = await passkey.credentials();

  // The enrollment link again, in a fresh browser: used.
  const fresh = await browser.newContext();
  const again = await (await fresh.newPage()).goto(config.enroll);
  out.reused_enroll_status = again ? again.status() : null;
  await fresh.close();
});
