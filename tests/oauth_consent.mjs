// The person consenting to one client's authorization request (`config.authorize`) in the
// console, with a passkey enrolled from `config.enroll`: prints the URL the browser was sent
// back to, as one JSON line. For clients whose own flow runs elsewhere (the Python SDK's).
// Usage: node oauth_consent.mjs CONFIG_JSON
//   CONFIG_JSON: { "enroll": link, "authorize": url, "chromium": path, "redirect": url,
//                  "account": id, "mode": "r"|"rw", "shots": dir }
import { authenticator, session } from "./console_launch.mjs";
import { consenting, enroll } from "./oauth_browser.mjs";

await session(async ({ context, page, config, out }) => {
  await authenticator(context, page);
  await enroll(page, config.enroll);
  const consent = await consenting(page, config);
  const given = await consent(config.authorize);
  out.consent = given.text;
  out.back = given.back.href;
});
