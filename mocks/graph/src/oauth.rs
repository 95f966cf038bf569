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
use serde_json::json;

use crate::{App, lock};

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

fn aad_error(error: &str, code: &str, text: &str) -> Response {
    let body = json!({
        "error": error,
        "error_description": format!("{code}: {text}"),
        "error_codes": [code.trim_start_matches("AADSTS").parse::<u64>().unwrap_or(0)],
    });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// `POST /{tenant}/oauth2/v2.0/devicecode`: a device code and the code a person types.
pub async fn devicecode(
    AxState(app): AxState<App>,
    Path(_tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if form.get("client_id").is_none_or(String::is_empty) {
        return aad_error("invalid_request", "AADSTS900144", "client_id is required");
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
/// declined, or tokens) and the refresh grant.
pub async fn token(
    AxState(app): AxState<App>,
    Path(_tenant): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut s = lock(&app.state);
    let id = &mut s.identity;
    let grant = form
        .get("grant_type")
        .map(String::as_str)
        .unwrap_or_default();
    let scope = match grant {
        DEVICE_GRANT => {
            let code = form.get("device_code").cloned().unwrap_or_default();
            let Some(device) = id.devices.get_mut(&code) else {
                return aad_error(
                    "invalid_grant",
                    "AADSTS70000",
                    "The device code is not valid.",
                );
            };
            let now = Instant::now();
            if now > device.expires {
                return aad_error(
                    "expired_token",
                    "AADSTS70020",
                    "The device code has expired.",
                );
            }
            let early = device
                .last_poll
                .is_some_and(|last| now < last + Duration::from_secs(device.interval));
            device.last_poll = Some(now);
            if early {
                device.interval += 5;
                return aad_error("slow_down", "AADSTS70016", "Polling too fast; slow down.");
            }
            if device.declined {
                return aad_error(
                    "authorization_declined",
                    "AADSTS70000",
                    "The end user denied the authorization request.",
                );
            }
            if !device.approved {
                return aad_error(
                    "authorization_pending",
                    "AADSTS70016",
                    "OAuth 2.0 device flow error. Authorization is pending.",
                );
            }
            let scope = device.scope.clone();
            id.devices.remove(&code);
            scope
        }
        "refresh_token" => {
            let refresh = form.get("refresh_token").cloned().unwrap_or_default();
            let Some(scope) = id.refresh.remove(&refresh) else {
                return aad_error(
                    "invalid_grant",
                    "AADSTS70008",
                    "The refresh token has expired or is invalid due to sign-in frequency checks or a revocation.",
                );
            };
            scope
        }
        other => {
            return aad_error(
                "unsupported_grant_type",
                "AADSTS70003",
                &format!("The app requested an unsupported grant type '{other}'."),
            );
        }
    };
    let (access, refresh) = id.grant(&scope);
    let ttl = id.token_ttl.unwrap_or(Duration::from_secs(3600));
    axum::Json(json!({
        "token_type": "Bearer",
        "scope": scope,
        "expires_in": ttl.as_secs(),
        "access_token": access,
        "refresh_token": refresh,
    }))
    .into_response()
}
