//! Confirmation of risky writes (SPEC §6), by whichever means the client has:
//! elicitation (protocol ≤ 2025-11-25), an input-required result (2026-07-28), or, for a
//! client with neither, a two-step flow where a dry run hands out a `confirm_token`.
//!
//! Architecture Invariant: a token is bound to a digest of the tool, its exact arguments and
//! the resolved messages; it is single-use and expires after `TOKEN_TTL`. A write that needed
//! confirmation and did not get it sends nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion,
};
use rmcp::service::{ElicitationError, RequestContext};
use rmcp::{RoleServer, elicit_safe};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// Issued confirm tokens: token → (binding digest, expiry).
#[derive(Clone, Default)]
pub struct Tokens(Arc<Mutex<HashMap<String, (String, Instant)>>>);

impl Tokens {
    pub fn issue(&self, binding: &str) -> Result<String> {
        let token = super::random_hex(16)?;
        let mut map = self
            .0
            .lock()
            .map_err(|_| Error::internal("confirm tokens poisoned"))?;
        let now = Instant::now();
        map.retain(|_, (_, expires)| *expires > now);
        map.insert(token.clone(), (binding.to_string(), now + TOKEN_TTL));
        Ok(token)
    }

    /// Takes the token if it is live and bound to `binding`; a mismatch leaves it in place.
    fn redeem(&self, token: &str, binding: &str) -> Result<()> {
        let mut map = self
            .0
            .lock()
            .map_err(|_| Error::internal("confirm tokens poisoned"))?;
        let refuse = |why: &str| {
            Error::confirmation_required(format!("the confirm_token {why}; nothing was changed"))
                .with_next_step(
                    "call again with dry_run: true, show the plan to the user, and pass the new confirm_token",
                )
        };
        match map.get(token) {
            None => Err(refuse("is unknown, used or expired")),
            Some((_, expires)) if *expires <= Instant::now() => {
                map.remove(token);
                Err(refuse("has expired"))
            }
            Some((bound, _)) if bound != binding => {
                Err(refuse("was issued for other arguments or other messages"))
            }
            Some(_) => {
                map.remove(token);
                Ok(())
            }
        }
    }
}

/// The digest a token is bound to: tool, arguments (without `dry_run`/`confirm_token`) and
/// the ids of the messages they resolve to.
pub fn binding(tool: &str, args: &serde_json::Value, ids: &[i64]) -> String {
    let mut args = args.clone();
    if let Some(map) = args.as_object_mut() {
        map.remove("dry_run");
        map.remove("confirm_token");
    }
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update([0]);
    hasher.update(args.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::Value::from(ids).to_string().as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn declined() -> Error {
    Error::confirmation_declined("the user did not confirm this write; nothing was changed")
        .with_next_step("ask the user what they want instead")
}

/// Obtains the user's confirmation for a write described by `reason`.
pub async fn confirm(
    ctx: &RequestContext<RoleServer>,
    tokens: &Tokens,
    binding: &str,
    reason: &str,
    token: Option<&str>,
    round: (Option<&str>, Option<&rmcp::model::InputResponses>),
) -> Result<Asked> {
    if let Some(token) = token {
        tokens.redeem(token, binding)?;
        return Ok(Asked::Confirmed);
    }
    let message = format!("mailbroker: allow this write? It {reason}.");
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    if modern {
        let (state, responses) = round;
        if let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) {
            // The state echoes the binding: an answer given for other arguments is ignored.
            if state != Some(binding) {
                return Err(Error::confirmation_required(
                    "the confirmation answered a different request",
                )
                .with_next_step("call the tool again without input responses"));
            }
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
                Some(binding.to_string()),
            )));
        }
        return Err(token_flow(reason));
    }
    match ctx.peer.elicit::<ConfirmWrite>(message).await {
        Ok(Some(ConfirmWrite { confirm: true })) => Ok(Asked::Confirmed),
        Ok(_) | Err(ElicitationError::UserDeclined) | Err(ElicitationError::UserCancelled) => {
            Err(declined())
        }
        Err(ElicitationError::CapabilityNotSupported) => Err(token_flow(reason)),
        Err(e) => Err(Error::confirmation_required(format!(
            "could not ask the user to confirm: {e}"
        ))
        .with_next_step("call again with dry_run: true and use the confirm_token it returns")),
    }
}

fn token_flow(reason: &str) -> Error {
    Error::confirmation_required(format!(
        "this write needs the user's confirmation: it {reason}; nothing was changed"
    ))
    .with_next_step(
        "call again with dry_run: true, show the plan to the user, and once they approve pass its confirm_token",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_single_use_and_bound() {
        let tokens = Tokens::default();
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
        // Order of ids and dry_run/confirm_token do not change the binding.
        let a2 = binding(
            "update_message",
            &serde_json::json!({"read": true, "dry_run": true, "confirm_token": "x"}),
            &[1, 2],
        );
        assert_eq!(a, a2);
        let token = tokens.issue(&a).unwrap();
        let err = tokens.redeem(&token, &b).unwrap_err();
        assert_eq!(err.error_type(), "confirmation_required");
        tokens.redeem(&token, &a).unwrap();
        let again = tokens.redeem(&token, &a).unwrap_err();
        assert_eq!(again.error_type(), "confirmation_required");
    }
}
