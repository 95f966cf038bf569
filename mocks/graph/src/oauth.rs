//! The Microsoft identity platform's endpoints a mail client uses, for one tenant path
//! (`common`, `organizations`, `consumers` or an id): the device code flow (RFC 8628, with
//! its polling answers), refresh, and the tokens `/v1.0` calls must carry. Errors use its
//! shape: `{"error", "error_description"}` with an `AADSTS` code in the description.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{App, Logged, lock};

pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// A device code handed out and not yet redeemed.
#[derive(Debug, Clone)]
pub struct Device {
    pub user_code: String,
    pub scope: String,
    pub approved: bool,
    /// The person declined: polls get `authorization_declined`.
    pub declined: bool,
    pub expires: Instant,
    /// Seconds a client must wait between polls; `slow_down` adds 5 (RFC 8628 §3.5).
    pub interval: u64,
    pub last_poll: Option<Instant>,
}

/// What the identity side of the mock holds.
#[derive(Debug, Default)]
pub struct Identity {
    pub devices: HashMap<String, Device>,
    /// Live access tokens, with when each expires.
    pub tokens: HashMap<String, Instant>,
    /// Refresh tokens, with their scope.
    pub refresh: HashMap<String, String>,
    pub token_ttl: Option<Duration>,
    /// Seconds between polls a new device code asks for.
    pub interval: u64,
    /// How long a device code lives.
    pub device_ttl: Option<Duration>,
    /// The next this many device code polls are answered `slow_down`, as Microsoft does
    /// when it finds a client polling too fast.
    pub slow_down: u32,
    /// The tenant withdrew consent: refresh grants are refused with AADSTS65001.
    pub consent_required: bool,
    next: u64,
}

impl Identity {
    /// Device codes ask to be polled every second.
    pub fn new() -> Identity {
        Identity {
            interval: 1,
            ..Identity::default()
        }
    }

    fn next(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("mock-{kind}-{:08}", self.next)
    }

    /// A live access token and a refresh token for `scope`.
    pub fn grant(&mut self, scope: &str) -> (String, String) {
        let access = self.next("at");
        let ttl = self.token_ttl.unwrap_or(Duration::from_secs(3600));
        self.tokens.insert(access.clone(), Instant::now() + ttl);
        let refresh = self.next("rt");
        self.refresh.insert(refresh.clone(), scope.to_string());
        (access, refresh)
    }

    pub fn live(&self, token: &str) -> bool {
        self.tokens.get(token).is_some_and(|t| *t > Instant::now())
    }
}

/// A refusal in the identity platform's shape: the OAuth error, and the AADSTS code first in
/// the description.
struct Refusal {
    error: &'static str,
    code: &'static str,
    text: String,
}

fn refuse(error: &'static str, code: &'static str, text: &str) -> Refusal {
    Refusal {
        error,
        code,
        text: text.to_string(),
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({
            "error": self.error,
            "error_description": format!("{}: {}", self.code, self.text),
            "error_codes": [self.code.trim_start_matches("AADSTS").parse::<u64>().unwrap_or(0)],
        });
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    }
}

/// `POST /{tenant}/oauth2/v2.0/devicecode`: a device code and the code a person types.
pub async fn devicecode(
    AxState(app): AxState<App>,
    Path(_tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if form.get("client_id").is_none_or(String::is_empty) {
        return refuse("invalid_request", "AADSTS900144", "client_id is required").into_response();
    }
    let scope = form.get("scope").cloned().unwrap_or_default();
    let mut s = lock(&app.state);
    let id = &mut s.identity;
    let device_code = id.next("dc");
    let user_code = format!("MOCK{:04}", id.next % 10_000);
    let ttl = id.device_ttl.unwrap_or(Duration::from_secs(900));
    let interval = id.interval;
    id.devices.insert(
        device_code.clone(),
        Device {
            user_code: user_code.clone(),
            scope,
            approved: false,
            declined: false,
            expires: Instant::now() + ttl,
            interval,
            last_poll: None,
        },
    );
    let verification_uri = format!("{}/devicelogin", app.base);
    axum::Json(json!({
        "device_code": device_code,
        "user_code": user_code,
        "verification_uri": verification_uri,
        "expires_in": ttl.as_secs(),
        "interval": interval,
        "message": format!("To sign in, use a web browser to open the page {verification_uri} and enter the code {user_code} to authenticate."),
    }))
    .into_response()
}

/// `POST /{tenant}/oauth2/v2.0/token`: the device code grant (pending, slow_down, expired,
/// declined, or tokens) and the refresh grant. Each answer is logged by its OAuth outcome.
pub async fn token(
    AxState(app): AxState<App>,
    Path(tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut s = lock(&app.state);
    let answer = grant(&mut s.identity, &form);
    s.log.push(Logged {
        method: "POST".into(),
        path: format!("/{tenant}/oauth2/v2.0/token"),
        status: if answer.is_ok() { 200 } else { 400 },
        inner: None,
        writes: 0,
        oauth: Some(match &answer {
            Ok(_) => "tokens".to_string(),
            Err(r) => r.error.to_string(),
        }),
    });
    match answer {
        Ok(tokens) => axum::Json(tokens).into_response(),
        Err(refusal) => refusal.into_response(),
    }
}

fn grant(id: &mut Identity, form: &HashMap<String, String>) -> Result<Value, Refusal> {
    let grant = form
        .get("grant_type")
        .map(String::as_str)
        .unwrap_or_default();
    let scope = match grant {
        DEVICE_GRANT => device_grant(id, form.get("device_code"))?,
        "refresh_token" if id.consent_required => {
            return Err(refuse(
                "invalid_grant",
                "AADSTS65001",
                "The user or administrator has not consented to use the application. Send an interactive authorization request for this user and resource.",
            ));
        }
        "refresh_token" => {
            let refresh = form.get("refresh_token").cloned().unwrap_or_default();
            id.refresh.remove(&refresh).ok_or_else(|| {
                refuse(
                    "invalid_grant",
                    "AADSTS70008",
                    "The refresh token has expired or is invalid due to sign-in frequency checks or a revocation.",
                )
            })?
        }
        other => {
            return Err(refuse(
                "unsupported_grant_type",
                "AADSTS70003",
                &format!("The app requested an unsupported grant type '{other}'."),
            ));
        }
    };
    let (access, refresh) = id.grant(&scope);
    let ttl = id.token_ttl.unwrap_or(Duration::from_secs(3600));
    Ok(json!({
        "token_type": "Bearer",
        "scope": scope,
        "expires_in": ttl.as_secs(),
        "access_token": access,
        "refresh_token": refresh,
    }))
}

/// One poll of a device code: the scope it was granted for, or why not yet.
fn device_grant(id: &mut Identity, code: Option<&String>) -> Result<String, Refusal> {
    let code = code.cloned().unwrap_or_default();
    let forced_slow_down = id.slow_down > 0;
    let Some(device) = id.devices.get_mut(&code) else {
        return Err(refuse(
            "invalid_grant",
            "AADSTS70000",
            "The device code is not valid.",
        ));
    };
    let now = Instant::now();
    if now > device.expires {
        return Err(refuse(
            "expired_token",
            "AADSTS70020",
            "The device code has expired.",
        ));
    }
    let early = device
        .last_poll
        .is_some_and(|last| now < last + Duration::from_secs(device.interval));
    device.last_poll = Some(now);
    if early || forced_slow_down {
        device.interval += 5;
        id.slow_down = id.slow_down.saturating_sub(1);
        return Err(refuse(
            "slow_down",
            "AADSTS70016",
            "Polling too fast; slow down.",
        ));
    }
    if device.declined {
        return Err(refuse(
            "authorization_declined",
            "AADSTS70000",
            "The end user denied the authorization request.",
        ));
    }
    if !device.approved {
        return Err(refuse(
            "authorization_pending",
            "AADSTS70016",
            "OAuth 2.0 device flow error. Authorization is pending.",
        ));
    }
    let scope = device.scope.clone();
    id.devices.remove(&code);
    Ok(scope)
}
