// The person's side of an OAuth consent, in the browser `console_launch.mjs` starts: a passkey
// enrolled from the link a terminal showed, and a client's authorization request allowed in
// the console (the accounts and mode from the config) with that passkey. The browser's way
// back to the client is caught, never served.
export async function enroll(page, link) {
  await page.goto(link);
  await page.fill("input[name=name]", "laptop");
  await Promise.all([
    page.waitForURL((url) => url.pathname === "/console", { timeout: 15000 }),
    page.click("form[data-passkey=enroll] button"),
  ]);
}

// A `consent(authorizeUrl, shot?)` for `page`: what the page showed, and the URL the browser
// was sent back to.
export async function consenting(page, config) {
  await page.route(`${new URL(config.redirect).origin}/**`, (route) =>
    route.fulfill({ status: 200, body: "back at the client" }));
  return async (authorizeUrl, shot) => {
    await page.goto(authorizeUrl);
    if (shot) await page.screenshot({ path: `${config.shots}/${shot}` });
    const text = await page.locator("section.grant").innerText();
    await page.check(`input[name=account][value="${config.account}"]`);
    await page.check(`input[name=mode][value="${config.mode}"]`);
    // Back at the client once the page has gone there, not before.
    await Promise.all([
      page.waitForURL((url) => url.href.startsWith(config.redirect), { timeout: 15000 }),
      page.click("form[data-choices] button"),
    ]);
    return { text, back: new URL(page.url()) };
  };
}
