// Drives the console in Debian's Chromium with playwright-core, as a person would: opens the
// printed sign-in link, visits every page, and prints what each showed as one JSON line.
// Usage: node console_browser.mjs CONFIG_JSON
//   CONFIG_JSON: { "link": sign-in URL, "pages": [paths], "shots": dir, "chromium": path }
import { session } from "./console_launch.mjs";

await session(async ({ browser, context, page, config, out }) => {
  page.on("dialog", async (d) => {
    out.dialogs.push(d.message());
    await d.dismiss();
  });
  page.on("console", (m) => {
    if (m.type() === "error") out.console_errors.push(m.text());
  });
  const signIn = await page.goto(config.link);
  out.signed_in_at = page.url();
  out.sign_in_status = signIn ? signIn.status() : null;
  for (const [i, path] of config.pages.entries()) {
    const response = await page.goto(new URL(path, config.link).href);
    const name = `${String(i).padStart(2, "0")}-${path.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "")}`;
    await page.screenshot({ path: `${config.shots}/${name}.png`, fullPage: false });
    out.pages[path] = {
      status: response ? response.status() : null,
      title: await page.title(),
      text: await page.innerText("body"),
      // Anything a hostile text could have made run or load.
      scripts: await page.locator("script:not([src='/console/passkey.js'])").count(),
      pwned: await page.evaluate(() => window.pwned === undefined ? null : String(window.pwned)),
      bars: await page.locator("figure.chart rect").count(),
      bar_values: await page.locator("figure.chart").evaluateAll((figs) =>
        figs.map((f) => Array.from(f.querySelectorAll("text"))
          .filter((_, j) => j % 2 === 1).map((t) => Number(t.textContent)))),
    };
  }
  // The same link a second time, in a browser with no session: refused.
  const other = await browser.newContext();
  const again = await (await other.newPage()).goto(config.link);
  out.reused_link_status = again ? again.status() : null;
  await other.close();
}, { pages: {}, dialogs: [], console_errors: [], csp_violations: [] });
