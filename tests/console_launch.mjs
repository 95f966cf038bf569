// What every console script starts with: Debian's Chromium under playwright-core, headless,
// reaching nothing beyond this machine; and a virtual authenticator as the person's passkey
// (CTAP2, user verification), holding the passkeys a previous script made, if given.
import { chromium } from "playwright-core";

// Runs `visit` in a fresh browser on a 1280×800 page with the script's config (its one
// argument, JSON), and prints what `visit` put in `out` as one JSON line.
export async function session(visit, out = {}) {
  const config = JSON.parse(process.argv[2]);
  const browser = await launch(config);
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await visit({ browser, context, page, config, out });
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
}

function launch(config) {
  return chromium.launch({
    executablePath: config.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

// The page's passkey: `credentials()` gives what it holds, for the next script.
export async function authenticator(context, page, credentials = []) {
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", transport: "internal", hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true },
  });
  for (const credential of credentials) {
    await cdp.send("WebAuthn.addCredential", { authenticatorId, credential });
  }
  return {
    credentials: async () => (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials,
  };
}
