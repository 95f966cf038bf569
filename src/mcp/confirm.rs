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
use rmcp::service::{ElicitationError, RequestContext};
use rmcp::{RoleServer, elicit_safe};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::Store;
use mailbroker_core::{Error, Result};

pub const TOKEN_TTL: Duration = Duration::from_secs(600);
/// The key of our one elicitation in an input-required round trip.
const INPUT_KEY: &str = "confirm";

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
    store: Store,
    /// Whether a confirm token needs the person's `mailbroker approve` before it runs a
    /// write (the default), or is enough by itself (`--confirm-with-token`).
    approval_needed: bool,
    /// Who approves: with passkeys only, neither elicitation nor `mailbroker approve`.
    approvals: crate::approvals::Approvals,
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
    /// the nonce remembered until it is answered or expires.
    fn ask(&self, binding: &str) -> Result<String> {
        let nonce = crate::util::random_hex(16)?;
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

    /// Checks that `state` was issued for `binding` under our key and is unexpired. Issued
    /// by this process alone, it is marked answered here (`None`); under a shared key, the
    /// nonce and expiry the index must record as answered are returned.
    fn verified(&self, state: Option<&str>, binding: &str) -> Result<Option<(String, i64)>> {
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
            return Ok(Some((nonce.to_string(), expires as i64)));
        }
        match issued.asked.remove(nonce) {
            Some(until) if until > Instant::now() => Ok(None),
            _ => Err(refuse_state()),
        }
    }
}

impl Confirmations {
    /// Honours `state` once as the answer to an input request for `binding`.
    async fn answered(&self, state: Option<&str>, binding: &str) -> Result<()> {
        match self.states.verified(state, binding)? {
            None => Ok(()),
            Some((nonce, expires)) => match self.store.claim_input_answer(&nonce, expires).await? {
                true => Ok(()),
                false => Err(refuse_state()),
            },
        }
    }

    pub fn new(
        store: Store,
        approval_needed: bool,
        approvals: crate::approvals::Approvals,
    ) -> Confirmations {
        Confirmations {
            states: InputStates::default(),
            store,
            approval_needed,
            approvals,
        }
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
        if let crate::approvals::Approvals::Passkey { console } = &self.approvals {
            return format!(
                "show the plan to the user and ask them to approve it with their passkey in the console, {console}/console; then call again with confirm_token"
            );
        }
        match self.approval_needed {
            true => format!(
                "show the plan to the user and ask them to approve it by running: mailbroker approve {token}; then call again with confirm_token"
            ),
            false => "show the plan to the user; once they approve, call again with confirm_token"
                .to_string(),
        }
    }

    async fn redeem(&self, token: &str, binding: &str) -> Result<()> {
        self.store
            .redeem_approval(token, binding, self.approval_needed)
            .await
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

fn declined() -> Error {
    Error::confirmation_declined("the user did not confirm this write; nothing was changed")
        .with_next_step("ask the user what they want instead")
}

/// Obtains the user's confirmation for a write described by `reason`.
pub async fn confirm(
    ctx: &RequestContext<RoleServer>,
    confirmations: &Confirmations,
    binding: &str,
    reason: &str,
    token: Option<&str>,
    round: (Option<&str>, Option<&rmcp::model::InputResponses>),
) -> Result<Asked> {
    if let Some(token) = token {
        confirmations.redeem(token, binding).await?;
        return Ok(Asked::Confirmed);
    }
    if let crate::approvals::Approvals::Passkey { console } = &confirmations.approvals {
        // The client's own user is not asked: only a passkey in the console approves.
        return Err(Error::confirmation_required(format!(
            "this write needs the user's approval with their passkey: it {reason}; nothing was changed"
        ))
        .with_next_step(format!(
            "call again with dry_run: true, and ask the user to approve its plan in the console, {console}/console; then call again with confirm_token"
        )));
    }
    let message = format!("mailbroker: allow this write? It {reason}.");
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    if modern {
        let (state, responses) = round;
        if let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) {
            // Honoured only as the answer to a request issued for exactly this call (by this
            // process, or one sharing its key file), once: a state computed offline,
            // replayed, or from another server is not.
            confirmations.answered(state, binding).await?;
            let accepted = answer["action"] == "accept" && answer["content"]["confirm"] == true;
            return if accepted {
                Ok(Asked::Confirmed)
            } else {
                Err(declined())
            };
        }
        let can_elicit = ctx
            .meta
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if can_elicit {
            let schema = rmcp::model::ElicitationSchema::from_type::<ConfirmWrite>()
                .map_err(|e| Error::internal(format!("confirmation schema: {e}")))?;
            let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            });
            let mut requests = InputRequests::new();
            requests.insert(INPUT_KEY.into(), InputRequest::Elicitation(request));
            return Ok(Asked::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(confirmations.states.ask(binding)?),
            )));
        }
        return Err(token_flow(reason, confirmations.approval_needed));
    }
    match ctx.peer.elicit::<ConfirmWrite>(message).await {
        Ok(Some(ConfirmWrite { confirm: true })) => Ok(Asked::Confirmed),
        Ok(_) | Err(ElicitationError::UserDeclined) | Err(ElicitationError::UserCancelled) => {
            Err(declined())
        }
        Err(ElicitationError::CapabilityNotSupported) => {
            Err(token_flow(reason, confirmations.approval_needed))
        }
        Err(e) => Err(Error::confirmation_required(format!(
            "could not ask the user to confirm: {e}"
        ))
        .with_next_step("call again with dry_run: true and use the confirm_token it returns")),
    }
}

/// The refusal of a write that needs confirming, for a client that cannot ask the user: it
/// fails closed. The dry run's token is approved by the person (`mailbroker approve`), not by
/// the assistant, unless the server was started with `--confirm-with-token`.
fn token_flow(reason: &str, approval_needed: bool) -> Error {
    let step = match approval_needed {
        true => {
            "call again with dry_run: true; show the user its plan and ask them to approve it by running: mailbroker approve CONFIRM_TOKEN; then call again with confirm_token"
        }
        false => {
            "call again with dry_run: true, show the plan to the user, and once they approve pass its confirm_token"
        }
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
        let state = mine.ask(&a).unwrap();
        // Not for other arguments, not from another process, not twice, not made up.
        let refused =
            |r: Result<()>| assert_eq!(r.unwrap_err().error_type(), "confirmation_required");
        let answered = |states: &InputStates, state: Option<&str>, binding: &str| {
            states
                .verified(state, binding)
                .map(|shared| assert_eq!(shared, None))
        };
        refused(answered(&mine, Some(&state), &b));
        refused(answered(&InputStates::default(), Some(&state), &a));
        answered(&mine, Some(&state), &a).unwrap();
        refused(answered(&mine, Some(&state), &a));
        refused(answered(&mine, Some(&a), &a));
        refused(answered(&mine, None, &a));
        let fresh = mine.ask(&a).unwrap();
        let (nonce, rest) = fresh.split_once('.').unwrap();
        refused(answered(&mine, Some(&format!("{nonce}.9{rest}")), &a));
    }
}
