// The console's one script: a passkey's enrollment, and the passkey question that every
// decision taken here needs. The server checks each answer against the question it asked
// for exactly that decision; this script only carries them.
"use strict";

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const answer = await response.json().catch(() => ({ ok: false, error: `HTTP ${response.status}` }));
  if (!response.ok || !answer.ok) {
    const next = answer.next_step ? ` Next: ${answer.next_step}` : "";
    throw new Error(`${answer.error || "refused"}.${next}`);
  }
  return answer;
}

// What the form says: `pending` while the passkey is asked, then `done` or `error`.
function say(form, text, state) {
  const out = form.querySelector("output");
  out.textContent = text;
  out.className = state;
}

async function enroll(form) {
  const key = form.dataset.key;
  const { options } = await post("/console/enroll/options", { key });
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey);
  const credential = await navigator.credentials.create({ publicKey });
  const name = form.elements.name.value;
  await post("/console/enroll/finish", { key, name, credential: credential.toJSON() });
  location.assign("/console");
}

// A browser not signed in: the passkey's answer signs it in, and the page it asked for shows.
async function signIn() {
  const { options, ceremony } = await post("/console/sign-in/options", {});
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
  const credential = await navigator.credentials.get({ publicKey });
  await post("/console/sign-in/passkey", { ceremony, credential: credential.toJSON() });
  location.reload();
}

// The decision the passkey is asked about, with what the person chose on the form (an
// assistant's access: read or read-write, and the accounts), so the answer covers them.
function actionOf(form) {
  if (form.dataset.choices === undefined) return form.dataset.action;
  const accounts = [...form.querySelectorAll("input[name=account]:checked")].map((i) => i.value);
  return `${form.dataset.action}:${form.elements.mode.value}:${accounts.join("+")}`;
}

async function act(form) {
  const action = actionOf(form);
  const csrf = form.elements.csrf.value;
  const { options } = await post("/console/act/options", { action, csrf });
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
  const credential = await navigator.credentials.get({ publicKey });
  const done = await post("/console/act", { action, csrf, credential: credential.toJSON() });
  say(form, done.message, "done");
  // A run goes on in the server: its page follows it.
  if (done.location) location.assign(done.location);
  // Decided: the other buttons of the same request have nothing left to do.
  const card = form.closest("section") || form;
  card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
}

for (const form of document.querySelectorAll("form[data-passkey]")) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const run = { enroll, "sign-in": signIn }[form.dataset.passkey] || act;
    say(form, "answer your passkey's question…", "pending");
    run(form).catch((e) => say(form, e.message, "error"));
  });
}
