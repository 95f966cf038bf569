//! Confirmation of risky writes (SPEC §6), by whichever means the client has:
//! elicitation (protocol ≤ 2025-11-25), an input-required result (2026-07-28), or, for a
//! client with neither, a two-step flow where a dry run hands out a `confirm_token`.
//!
//! Architecture Invariant: a token is bound to a digest of the tool, its exact arguments and
//! the resolved messages; it is single-use and expires after `TOKEN_TTL`. An input request's
//! state is that digest's HMAC (with a nonce and an expiry) under a key drawn by this server
//! process, and is honoured once, only as the answer to a request this process issued; or,
//! where the processes serving one index share a key file (`MAILBROKER_SECRET_KEY_FILE`),
//! under a key derived from it, honoured once by any of them (the index records each answer).
//! Either way the key is out of reach of whoever reads the index. A write that needed
//! confirmation and did not get it sends nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, elicit_safe};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::{Needed, Store};
use mailbroker_core::{Error, Result};

pub const TOKEN_TTL: Duration = Duration::from_secs(600);
/// The key of our one elicitation in an input-required round trip.
const INPUT_KEY: &str = "confirm";
/// How a request state's nonce says it asked the user to open the console's page (the rest
/// is that page): its answer is then the person's decision there, never the client's.
const URL_NONCE: &str = "page-";
/// How a request state's nonce says it asked the client's form, for the write also waiting at
/// its page in the console (the rest): a no in either place is the answer.
const FORM_NONCE: &str = "form-";

/// What the user is asked: one yes/no.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ConfirmWrite {
    /// true to let this write run.
    pub confirm: bool,
}
elicit_safe!(ConfirmWrite);

/// What comes of asking.
pub enum Asked {
    Confirmed,
    /// Ask through the client and call again (protocol 2026-07-28).
    InputRequired(InputRequiredResult),
}

/// How this server confirms writes: the input requests it issued (protocol 2026-07-28),
/// signed with a key of its own, and the confirm tokens of the dry-run route, which rest in
/// the index so that the person can approve one from the CLI (`mailbroker approve`). Clones
/// share it.
#[derive(Clone)]
pub struct Confirmations {
    states: InputStates,
    pub(super) store: Store,
    /// Whether a confirm token needs the person's `mailbroker approve` before it runs a
    /// write (the default), or is enough by itself (`--confirm-with-token`).
    approval_needed: bool,
    /// Who approves: with passkeys only, neither elicitation nor `mailbroker approve`.
    approvals: crate::approvals::Approvals,
    /// The person's console (its origin), where a waiting write has its page.
    console: String,
}

/// The input requests this process issued and their signing key.
#[derive(Clone, Default)]
struct InputStates(Arc<Mutex<Issued>>);

#[derive(Default)]
struct Issued {
    /// Drawn at first use; never leaves the process, so a state from another process (or
    /// computed offline) does not verify. Derived from the key file instead where one is
    /// given (`shared`), so every process given it verifies the others' states.
    key: Option<[u8; 32]>,
    shared: bool,
    /// Nonce of each input request issued and not yet answered → its expiry.
    asked: HashMap<String, Instant>,
}

type Signer = Hmac<Sha256>;

fn refuse_state() -> Error {
    Error::confirmation_required(
        "this confirmation does not answer a request this server asked (or it was already \
         answered, or it expired); nothing was changed",
    )
    .with_next_step("call the tool again without input responses, and let the user answer")
}

impl Issued {
    fn key(&mut self) -> Result<[u8; 32]> {
        if let Some(key) = self.key {
            return Ok(key);
        }
        let key = match crate::sealed::subkey("mailbroker mcp input requests")? {
            Some(shared) => {
                self.shared = true;
                shared
            }
            None => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key)
                    .map_err(|e| Error::internal(format!("no randomness: {e}")))?;
                key
            }
        };
        self.key = Some(key);
        Ok(key)
    }
}

/// The signature of an input request's state: the binding, its nonce and its expiry.
fn signer(key: &[u8; 32], binding: &str, nonce: &str, expires: u64) -> Result<Signer> {
    let mut mac = <Signer as KeyInit>::new_from_slice(key)
        .map_err(|e| Error::internal(format!("confirmation key: {e}")))?;
    for part in [binding.as_bytes(), nonce.as_bytes(), &expires.to_be_bytes()] {
        mac.update(part);
        mac.update(&[0]);
    }
    Ok(mac)
}

/// The bytes `hex::encode` spelled, or `None` for anything else: only the exact text this server
/// issued may verify (a lenient decoder dropped a stray digit or pair, so several texts
/// answered one request).
fn unhex(text: &str) -> Option<Vec<u8>> {
    let lower_hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    if !text.len().is_multiple_of(2) || !text.bytes().all(lower_hex) {
        return None;
    }
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
        .collect()
}

impl InputStates {
    fn issued(&self) -> Result<std::sync::MutexGuard<'_, Issued>> {
        self.0
            .lock()
            .map_err(|_| Error::internal("confirmations poisoned"))
    }

    /// The request state of a new input request for `binding`: `nonce.expiry.signature`,
    /// the nonce (drawn here unless given) remembered until it is answered or expires.
    fn ask(&self, binding: &str, nonce: Option<&str>) -> Result<String> {
        let nonce = match nonce {
            Some(nonce) => nonce.to_string(),
            None => crate::util::random_hex(16)?,
        };
        let mut issued = self.issued()?;
        let now = Instant::now();
        issued.asked.retain(|_, expires| *expires > now);
        let expires = crate::store::now_secs().max(0) as u64 + TOKEN_TTL.as_secs();
        let key = issued.key()?;
        let signature = hex::encode(
            signer(&key, binding, &nonce, expires)?
                .finalize()
                .into_bytes(),
        );
        issued.asked.insert(nonce.clone(), now + TOKEN_TTL);
        Ok(format!("{nonce}.{expires}.{signature}"))
    }

    /// Checks that `state` was issued for `binding` under our key and is unexpired, and
    /// gives its nonce. Issued by this process alone, it is marked answered here; under a
    /// shared key, the expiry the index must record it answered until comes with it.
    fn verified(&self, state: Option<&str>, binding: &str) -> Result<(String, Option<i64>)> {
        let mut parts = state.unwrap_or_default().splitn(3, '.');
        let (Some(nonce), Some(expires), Some(signature)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(refuse_state());
        };
        let expires: u64 = expires.parse().map_err(|_| refuse_state())?;
        let signature = unhex(signature).ok_or_else(refuse_state)?;
        let mut issued = self.issued()?;
        let key = issued.key()?;
        signer(&key, binding, nonce, expires)?
            .verify_slice(&signature)
            .map_err(|_| refuse_state())?;
        if (expires as i64) < crate::store::now_secs() {
            return Err(refuse_state());
        }
        if issued.shared {
            return Ok((nonce.to_string(), Some(expires as i64)));
        }
        match issued.asked.remove(nonce) {
            Some(until) if until > Instant::now() => Ok((nonce.to_string(), None)),
            _ => Err(refuse_state()),
        }
    }
}

impl Confirmations {
    /// Honours `state` once as the answer to an input request for `binding`; its nonce.
    async fn answered(&self, state: Option<&str>, binding: &str) -> Result<String> {
        match self.states.verified(state, binding)? {
            (nonce, None) => Ok(nonce),
            (nonce, Some(expires)) => match self.store.claim_input_answer(&nonce, expires).await? {
                true => Ok(nonce),
                false => Err(refuse_state()),
            },
        }
    }

    /// `console` is the console's origin, where a person approves a waiting write.
    pub fn new(
        store: Store,
        approval_needed: bool,
        approvals: crate::approvals::Approvals,
        console: String,
    ) -> Confirmations {
        Confirmations {
            states: InputStates::default(),
            store,
            approval_needed,
            approvals,
            console,
        }
    }

    /// The console's page of the waiting write `page`.
    pub fn page_url(&self, page: &str) -> String {
        format!("{}/console/waiting/{page}", self.console)
    }

    /// A confirm token for the write bound to `binding`, recorded with what the person will
    /// be shown (`description`) when they approve it.
    pub async fn issue(&self, binding: &str, description: &serde_json::Value) -> Result<String> {
        let token = crate::util::random_hex(16)?;
        let ttl = TOKEN_TTL.as_secs() as i64;
        self.store
            .issue_approval(&token, binding, description, ttl)
            .await?;
        Ok(token)
    }

    /// What the dry run tells the assistant to do with its token.
    pub fn token_step(&self, token: &str) -> String {
        let page = self.page_url(&crate::store::Approval::page_of(token));
        if self.approvals.passkey_only() {
            return format!(
                "show the plan to the user and ask them to approve it with their passkey in the console, {page}; then call again with confirm_token"
            );
        }
        match self.approval_needed {
            true => format!(
                "show the plan to the user and ask them to approve it by running: mailbroker approve {token}, or with their passkey in the console, {page}; then call again with confirm_token"
            ),
            false => "show the plan to the user; once they approve, call again with confirm_token"
                .to_string(),
        }
    }

    async fn redeem(&self, token: &str, binding: &str) -> Result<()> {
        self.store
            .redeem_approval(token, binding, self.needed())
            .await
    }

    /// What a confirm token needs before it runs a write here.
    pub(super) fn needed(&self) -> Needed {
        match (self.approvals.passkey_only(), self.approval_needed) {
            (true, _) => Needed::Passkey,
            (false, true) => Needed::Person,
            (false, false) => Needed::Token,
        }
    }
}

/// The digest a token is bound to: tool, arguments (without `dry_run`/`confirm_token`) and
/// the set of messages they resolve to. Sets are bound as sets: the `ids` argument is left
/// to the resolved ids, and tag lists are sorted, so listing them in another order is the
/// same write.
pub fn binding(tool: &str, args: &serde_json::Value, ids: &[i64]) -> String {
    let mut args = args.clone();
    if let Some(map) = args.as_object_mut() {
        map.remove("dry_run");
        map.remove("confirm_token");
        map.remove("ids");
        for tags in ["add_tags", "remove_tags"] {
            if let Some(serde_json::Value::Array(list)) = map.get_mut(tags) {
                list.sort_by_key(|t| t.to_string());
            }
        }
    }
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update([0]);
    hasher.update(args.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::Value::from(ids).to_string().as_bytes());
    hex::encode(hasher.finalize())
}

pub(super) fn declined() -> Error {
    Error::confirmation_declined("the user did not confirm this write; nothing was changed")
        .with_next_step("ask the user what they want instead")
}

/// A write that needs the person's yes: what it is bound to, the sentence the person is
/// asked, and what the console shows of it (`description`).
pub struct Request<'a> {
    pub binding: &'a str,
    pub reason: &'a str,
    pub description: serde_json::Value,
}

/// How the client can ask its user: a form (a yes the client returns) or a URL it opens
/// (the console's page, where the person's passkey answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Modes {
    form: bool,
    url: bool,
}

impl Modes {
    fn of(caps: Option<&rmcp::model::ElicitationCapability>) -> Modes {
        match caps {
            None => Modes {
                form: false,
                url: false,
            },
            // A client that names neither mode asks by form (MCP 2025-06-18).
            Some(e) => Modes {
                form: e.form.is_some() || e.url.is_none(),
                url: e.url.is_some(),
            },
        }
    }
}

/// Obtains the user's confirmation for `request`.
pub async fn confirm(
    ctx: &RequestContext<RoleServer>,
    confirmations: &Confirmations,
    request: Request<'_>,
    token: Option<&str>,
    round: (Option<&str>, Option<&rmcp::model::InputResponses>),
) -> Result<Asked> {
    let (binding, reason) = (request.binding, request.reason);
    if let Some(token) = token {
        confirmations.redeem(token, binding).await?;
        return Ok(Asked::Confirmed);
    }
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let elicitation = match modern {
        true => ctx.meta.client_capabilities().and_then(|c| c.elicitation),
        false => (ctx.peer.peer_info()).and_then(|i| i.capabilities.elicitation.clone()),
    };
    let modes = Modes::of(elicitation.as_ref());
    let passkey = confirmations.approvals.passkey_only();
    // The console's page where only a passkey approves, or where the client has no form.
    let by_console = modes.url && (passkey || !modes.form);
    if modern {
        let (state, responses) = round;
        if let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) {
            // Honoured only as the answer to a request issued for exactly this call (by this
            // process, or one sharing its key file), once: a state computed offline,
            // replayed, or from another server is not.
            let nonce = confirmations.answered(state, binding).await?;
            let accepted = answer["action"] == "accept";
            if let Some(page) = nonce.strip_prefix(URL_NONCE) {
                // The client opened the page (or not); only the person's answer there counts.
                return confirmations
                    .decided_in_console(page, binding, accepted, ctx)
                    .await;
            }
            if passkey {
                return Err(passkey_refusal(reason, &confirmations.console));
            }
            let yes = accepted && answer["content"]["confirm"] == true;
            return match nonce.strip_prefix(FORM_NONCE) {
                Some(page) => confirmations.answered_in_form(page, binding, yes).await,
                None if yes => Ok(Asked::Confirmed),
                None => Err(declined()),
            };
        }
        if by_console {
            let (_, page) = confirmations.wait_in_console(&request).await?;
            let ask = ElicitRequest::new(ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: console_message(reason),
                url: confirmations.page_url(&page),
                elicitation_id: page.clone(),
            });
            let mut requests = InputRequests::new();
            requests.insert(INPUT_KEY.into(), InputRequest::Elicitation(ask));
            let state = confirmations
                .states
                .ask(binding, Some(&format!("{URL_NONCE}{page}")))?;
            return Ok(Asked::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(state),
            )));
        }
        if passkey {
            return Err(passkey_refusal(reason, &confirmations.console));
        }
        if modes.form {
            let schema = rmcp::model::ElicitationSchema::from_type::<ConfirmWrite>()
                .map_err(|e| Error::internal(format!("confirmation schema: {e}")))?;
            let ask = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: form_message(reason),
                requested_schema: schema,
            });
            let mut requests = InputRequests::new();
            requests.insert(INPUT_KEY.into(), InputRequest::Elicitation(ask));
            // Also in the console, where the person may decline it (or see what was asked).
            let (_, page) = confirmations.wait_in_console(&request).await?;
            let state =
                (confirmations.states).ask(binding, Some(&format!("{FORM_NONCE}{page}")))?;
            return Ok(Asked::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(state),
            )));
        }
        return Err(token_flow(reason, confirmations));
    }
    if by_console {
        return confirmations.by_console_page(ctx, &request).await;
    }
    if passkey {
        return Err(passkey_refusal(reason, &confirmations.console));
    }
    match modes.form {
        true => confirmations.by_form_or_console(ctx, &request).await,
        false => Err(token_flow(reason, confirmations)),
    }
}

pub(super) fn form_message(reason: &str) -> String {
    format!("mailbroker: allow this write? It {reason}.")
}

pub(super) fn console_message(reason: &str) -> String {
    format!(
        "mailbroker: a write waits for your passkey in your console. It {reason}. Open the page to approve or decline it there."
    )
}

/// Where only a passkey approves and the client cannot open the console's page for the user.
fn passkey_refusal(reason: &str, console: &str) -> Error {
    Error::confirmation_required(format!(
        "this write needs the user's approval with their passkey: it {reason}; nothing was changed"
    ))
    .with_next_step(format!(
        "call again with dry_run: true, and ask the user to approve its plan in the console, {console}/console; then call again with confirm_token"
    ))
}

/// The refusal of a write that needs confirming, for a client that cannot ask the user: it
/// fails closed. The dry run's token is approved by the person (`mailbroker approve`), not by
/// the assistant, unless the server was started with `--confirm-with-token`.
fn token_flow(reason: &str, confirmations: &Confirmations) -> Error {
    let step = match confirmations.approval_needed {
        true => format!(
            "call again with dry_run: true; show the user its plan and ask them to approve it by running: mailbroker approve CONFIRM_TOKEN, or with their passkey in the console, {}/console; then call again with confirm_token",
            confirmations.console
        ),
        false => "call again with dry_run: true, show the plan to the user, and once they approve pass its confirm_token".to_string(),
    };
    Error::confirmation_required(format!(
        "this write needs the user's confirmation: it {reason}; nothing was changed"
    ))
    .with_next_step(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_ignore_the_order_of_ids_and_the_confirmation_arguments() {
        let a = binding(
            "update_message",
            &serde_json::json!({"read": true}),
            &[2, 1],
        );
        let b = binding(
            "update_message",
            &serde_json::json!({"read": false}),
            &[1, 2],
        );
        assert_ne!(a, b);
        let a2 = binding(
            "update_message",
            &serde_json::json!({"read": true, "dry_run": true, "confirm_token": "x"}),
            &[1, 2],
        );
        assert_eq!(a, a2);
        // As the caller lists them: ids and tags in another order are the same write.
        let listed = |ids: [i64; 2], tags: [&str; 2]| {
            let args = serde_json::json!({"ids": ids, "add_tags": tags});
            binding("update_message", &args, &ids)
        };
        assert_eq!(listed([1, 2], ["a", "b"]), listed([2, 1], ["b", "a"]));
        assert_ne!(listed([1, 2], ["a", "b"]), listed([1, 2], ["a", "c"]));
    }

    #[test]
    fn input_states_are_keyed_single_use_and_bound() {
        let mine = InputStates::default();
        let a = binding(
            "update_message",
            &serde_json::json!({"move_to": "trash"}),
            &[1],
        );
        let b = binding(
            "update_message",
            &serde_json::json!({"move_to": "trash"}),
            &[2],
        );
        let state = mine.ask(&a, None).unwrap();
        // Not for other arguments, not from another process, not twice, not made up.
        let refused =
            |r: Result<()>| assert_eq!(r.unwrap_err().error_type(), "confirmation_required");
        let answered = |states: &InputStates, state: Option<&str>, binding: &str| {
            states
                .verified(state, binding)
                .map(|(_, shared)| assert_eq!(shared, None))
        };
        refused(answered(&mine, Some(&state), &b));
        refused(answered(&InputStates::default(), Some(&state), &a));
        answered(&mine, Some(&state), &a).unwrap();
        refused(answered(&mine, Some(&state), &a));
        refused(answered(&mine, Some(&a), &a));
        refused(answered(&mine, None, &a));
        let fresh = mine.ask(&a, None).unwrap();
        let (nonce, rest) = fresh.split_once('.').unwrap();
        refused(answered(&mine, Some(&format!("{nonce}.9{rest}")), &a));
    }
}
