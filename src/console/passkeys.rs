//! Passkeys: a person enrolls one from a link printed at a terminal (`console enroll`), and
//! every decision taken in the console needs a fresh assertion of one, with user
//! verification, checked here by webauthn-rs.
//!
//! Security Invariant: an assertion approves exactly one action. Its ceremony is begun for
//! one action by one signed-in session and kept in the index under both; the answer is
//! checked against that ceremony only, which is then gone. An assertion made for another
//! action, another session, or the same action twice does not verify.

use axum::Extension;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mailbroker_core::{Error, Result};
use serde::Deserialize;
use serde_json::json;
use webauthn_rs::prelude::{
    Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Uuid, Webauthn, WebauthnBuilder,
};

use super::decide::Action;
use super::{Console, Signed, pages, same};
use crate::store::LinkPurpose;

/// How long a browser has to answer a passkey question.
const CEREMONY_SECS: i64 = 300;

/// The relying party: the console's origin, its host as the id (WebAuthn takes a domain,
/// so a loopback console is `localhost`, not an address).
fn relying_party(console: &Console) -> Result<Webauthn> {
    let url = Url::parse(&console.origin.url).map_err(|e| Error::internal(e.to_string()))?;
    let id = url.host_str().unwrap_or_default().to_string();
    WebauthnBuilder::new(&id, &url)
        .and_then(|b| b.rp_name("mailbroker").build())
        .map_err(|e| {
            Error::validation(format!(
                "passkeys cannot be used at {}: {e}",
                console.origin.url
            ))
            .with_next_step("open the console at http://localhost:PORT or an https origin")
        })
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::internal(e.to_string())
}

/// A JSON answer for the page's script: `ok` and what to show, or the error's fields.
fn answer(outcome: Result<serde_json::Value>) -> Response {
    match outcome {
        Ok(mut value) => {
            value["ok"] = true.into();
            Json(value).into_response()
        }
        Err(e) => {
            let status = match e.error_type() {
                "internal_error" | "provider_unavailable" => StatusCode::INTERNAL_SERVER_ERROR,
                "not_found" => StatusCode::NOT_FOUND,
                _ => StatusCode::FORBIDDEN,
            };
            let body = json!({
                "ok": false, "error_type": e.error_type(), "error": e.message(),
                "next_step": e.next_step(),
            });
            (status, Json(body)).into_response()
        }
    }
}

/// The enrolled passkeys, as the library takes them, each with its row id.
async fn enrolled(console: &Console) -> Result<Vec<(i64, Passkey)>> {
    let mut out = Vec::new();
    for stored in console.store.passkeys().await? {
        let key: Passkey = serde_json::from_str(&stored.credential).map_err(internal)?;
        out.push((stored.id, key));
    }
    Ok(out)
}

#[derive(Deserialize)]
pub struct Key {
    key: String,
}

/// The enrollment page of a printed link: a name and a button (the script does the rest).
pub async fn enroll_page(State(c): State<Console>, Query(link): Query<Key>) -> Response {
    match c
        .store
        .check_console_link(&link.key, LinkPurpose::Enroll)
        .await
    {
        Ok(()) => pages::enroll(&link.key),
        Err(e) => pages::failure(&e),
    }
}

/// Begins an enrollment for a link that is still good (it is used when the passkey is kept).
pub async fn enroll_options(State(c): State<Console>, Json(link): Json<Key>) -> Response {
    answer(enroll_begin(&c, &link.key).await)
}

async fn enroll_begin(c: &Console, key: &str) -> Result<serde_json::Value> {
    c.store.check_console_link(key, LinkPurpose::Enroll).await?;
    let known = enrolled(c).await?;
    let exclude = known.iter().map(|(_, k)| k.cred_id().clone()).collect();
    let rp = relying_party(c)?;
    let (options, state) = rp
        .start_passkey_registration(
            Uuid::new_v4(),
            "mailbroker",
            "mailbroker console",
            Some(exclude),
        )
        .map_err(internal)?;
    let state = serde_json::to_string(&state).map_err(internal)?;
    c.store
        .begin_ceremony(key, "enroll", &state, CEREMONY_SECS)
        .await?;
    Ok(json!({ "options": options }))
}

#[derive(Deserialize)]
pub struct Enrolled {
    key: String,
    #[serde(default)]
    name: String,
    credential: RegisterPublicKeyCredential,
}

/// Keeps the passkey the browser made, uses the link, and signs the browser in.
pub async fn enroll_finish(State(c): State<Console>, Json(done): Json<Enrolled>) -> Response {
    with_session(&c, enroll_keep(&c, &done).await, "passkey kept")
}

async fn enroll_keep(c: &Console, done: &Enrolled) -> Result<String> {
    let refused = || {
        Error::validation("this enrollment was not asked for here, or it took too long")
            .with_next_step("reload the enrollment page and try again")
    };
    let state = c.store.take_ceremony(&done.key, "enroll").await?;
    let state: PasskeyRegistration =
        serde_json::from_str(&state.ok_or_else(refused)?).map_err(internal)?;
    let key = relying_party(c)?
        .finish_passkey_registration(&done.credential, &state)
        .map_err(|e| Error::validation(format!("the passkey was not accepted: {e}")))?;
    c.store
        .redeem_console_link(&done.key, LinkPurpose::Enroll)
        .await?;
    let name = match done.name.trim() {
        "" => "passkey".to_string(),
        name => crate::output::one_line(name).chars().take(60).collect(),
    };
    let credential = serde_json::to_string(&key).map_err(internal)?;
    c.store.add_passkey(&name, &credential).await?;
    let (secret, _) = c.store.open_console_session(super::SESSION_SECS).await?;
    Ok(secret)
}

#[derive(Deserialize)]
pub struct Ask {
    action: String,
    csrf: String,
}

fn form_refused() -> Error {
    Error::validation("this request is not from this session's page; nothing was done")
        .with_next_step("reload the page and try again")
}

/// Begins the passkey question for one action of this session.
pub async fn act_options(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Json(ask): Json<Ask>,
) -> Response {
    answer(act_begin(&c, &s, &ask).await)
}

async fn act_begin(c: &Console, s: &Signed, ask: &Ask) -> Result<serde_json::Value> {
    if !same(&ask.csrf, &s.session.csrf) {
        return Err(form_refused());
    }
    Action::parse(&ask.action)?.applies(c).await?;
    let (options, state) = question(c).await?;
    c.store
        .begin_ceremony(&s.secret, &ask.action, &state, CEREMONY_SECS)
        .await?;
    Ok(json!({ "options": options }))
}

#[derive(Deserialize)]
pub struct Act {
    action: String,
    csrf: String,
    /// The browser's assertion; a post without one is refused.
    credential: Option<PublicKeyCredential>,
}

/// Checks the passkey's answer to this action's question, then does the action.
pub async fn act(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Json(act): Json<Act>,
) -> Response {
    answer(
        act_checked(&c, &s, &act)
            .await
            .map(|done| json!({ "message": done.message, "location": done.location })),
    )
}

async fn act_checked(c: &Console, s: &Signed, act: &Act) -> Result<super::decide::Done> {
    if !same(&act.csrf, &s.session.csrf) {
        return Err(form_refused());
    }
    let action = Action::parse(&act.action)?;
    let refused = |why: &str| {
        Error::confirmation_required(format!("{why}; nothing was done"))
            .with_next_step("press the button again and answer your passkey's question")
    };
    let Some(credential) = &act.credential else {
        return Err(refused("this needs your passkey"));
    };
    let Some(state) = c.store.take_ceremony(&s.secret, &act.action).await? else {
        return Err(refused("no passkey question was asked for this"));
    };
    verified(c, &state, credential, refused).await?;
    action.run(c).await
}

/// A passkey question for any enrolled passkey: the options for the browser, and the
/// ceremony's state to keep.
async fn question(c: &Console) -> Result<(serde_json::Value, String)> {
    let keys: Vec<Passkey> = enrolled(c).await?.into_iter().map(|(_, k)| k).collect();
    if keys.is_empty() {
        return Err(Error::auth_required("no passkey is enrolled yet")
            .with_next_step("at a terminal, run: mailbroker console enroll"));
    }
    let (options, state) = relying_party(c)?
        .start_passkey_authentication(&keys)
        .map_err(internal)?;
    let options = serde_json::to_value(options).map_err(internal)?;
    Ok((options, serde_json::to_string(&state).map_err(internal)?))
}

/// Checks an assertion against the ceremony `state` it answers, with user verification, and
/// keeps the passkey's new counter.
async fn verified(
    c: &Console,
    state: &str,
    credential: &PublicKeyCredential,
    refused: impl Fn(&str) -> Error,
) -> Result<()> {
    let state: PasskeyAuthentication = serde_json::from_str(state).map_err(internal)?;
    let result = relying_party(c)?
        .finish_passkey_authentication(credential, &state)
        .map_err(|_| refused("the passkey's answer is not for this"))?;
    if !result.user_verified() {
        return Err(refused(
            "the passkey did not verify you (fingerprint, face or PIN)",
        ));
    }
    for (id, mut key) in enrolled(c).await? {
        if key.update_credential(&result).is_some() {
            let kept = serde_json::to_string(&key).map_err(internal)?;
            c.store.used_passkey(id, &kept).await?;
        }
    }
    Ok(())
}

/// The passkey question of a browser that is not signed in: its answer signs it in, as a
/// printed link does. The ceremony is the browser's own, under a name drawn here.
pub async fn sign_in_options(State(c): State<Console>) -> Response {
    answer(sign_in_begin(&c).await)
}

async fn sign_in_begin(c: &Console) -> Result<serde_json::Value> {
    let (options, state) = question(c).await?;
    let ceremony = crate::util::random_hex(16)?;
    c.store
        .begin_ceremony(&ceremony, SIGN_IN, &state, CEREMONY_SECS)
        .await?;
    Ok(json!({ "options": options, "ceremony": ceremony }))
}

const SIGN_IN: &str = "sign-in";

#[derive(Deserialize)]
pub struct SignedIn {
    ceremony: String,
    credential: PublicKeyCredential,
}

/// Checks the passkey's answer to a sign-in question and opens a session.
pub async fn sign_in_finish(State(c): State<Console>, Json(done): Json<SignedIn>) -> Response {
    let refused = |why: &str| {
        Error::auth_required(format!("{why}; you are not signed in"))
            .with_next_step("press the button again and answer your passkey's question")
    };
    let signed = async {
        let Some(state) = c.store.take_ceremony(&done.ceremony, SIGN_IN).await? else {
            return Err(refused("no passkey question was asked for this"));
        };
        verified(&c, &state, &done.credential, refused).await?;
        let (secret, _) = c.store.open_console_session(super::SESSION_SECS).await?;
        Ok(secret)
    };
    with_session(&c, signed.await, "signed in")
}

/// The answer that sets a new session's cookie, or the error.
fn with_session(c: &Console, secret: Result<String>, message: &str) -> Response {
    let secret = match secret {
        Ok(secret) => secret,
        Err(e) => return answer(Err(e)),
    };
    let mut response = answer(Ok(json!({ "message": message })));
    match super::session_cookie(&c.origin, &secret) {
        Ok(cookie) => {
            response
                .headers_mut()
                .insert(axum::http::header::SET_COOKIE, cookie);
            response
        }
        Err(e) => answer(Err(e)),
    }
}
