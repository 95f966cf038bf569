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

/// An authorization code and what redeeming it must match (PKCE, RFC 7636).
#[derive(Debug, Clone)]
pub struct Code {
    pub challenge: String,
    pub redirect_uri: String,
    pub scope: String,
}

/// What the identity side of the mock holds.
#[derive(Debug, Default)]
pub struct Identity {
    pub devices: HashMap<String, Device>,
    /// Live access tokens: when each expires and the scopes it grants.
    pub tokens: HashMap<String, (Instant, Vec<String>)>,
    /// What the person (or their administrator) consents to: a grant gets the requested
    /// scopes among these only. `None`: whatever is asked.
    pub grantable: Option<Vec<String>>,
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
    /// Authorization codes handed out by `authorize`, not yet redeemed.
    pub codes: HashMap<String, Code>,
    /// The tenant withdrew consent: refresh grants are refused with AADSTS65001.
    pub consent_required: bool,
    /// "Allow public client flows" is off in the app registration: the platform then
    /// treats the app as a confidential client and wants a secret or an assertion with a
    /// device code grant (AADSTS7000218).
    pub confidential: bool,
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

    /// A live access token and a refresh token for `scope`, as far as it is grantable;
    /// the scope granted is the third.
    pub fn grant(&mut self, scope: &str) -> (String, String, String) {
        let granted: Vec<String> = scope
            .split_whitespace()
            .filter(|s| {
                self.grantable
                    .as_ref()
                    .is_none_or(|ok| ok.iter().any(|g| short(g) == short(s)))
            })
            .map(str::to_string)
            .collect();
        let access = self.next("at");
        let ttl = self.token_ttl.unwrap_or(Duration::from_secs(3600));
        self.tokens
            .insert(access.clone(), (Instant::now() + ttl, granted.clone()));
        let refresh = self.next("rt");
        let granted = granted.join(" ");
        self.refresh.insert(refresh.clone(), granted.clone());
        (access, refresh, granted)
    }

    /// The scopes a live `token` grants; `None` for a token that is not live.
    pub fn scopes(&self, token: &str) -> Option<Vec<String>> {
        let (expires, scopes) = self.tokens.get(token)?;
        (*expires > Instant::now()).then(|| scopes.clone())
    }
}

/// A scope's name without the resource it is for (`https://graph.microsoft.com/Mail.Read`
/// is `Mail.Read`), compared case-blind as the platform does.
pub fn short(scope: &str) -> String {
    scope
        .rsplit('/')
        .next()
        .unwrap_or(scope)
        .to_ascii_lowercase()
}

/// A refusal in the identity platform's shape: the OAuth error, and the AADSTS code first in
/// the description.
struct Refusal {
    status: StatusCode,
    error: &'static str,
    code: &'static str,
    text: String,
}

fn refuse(error: &'static str, code: &'static str, text: &str) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
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
        (self.status, axum::Json(body)).into_response()
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
    let mut guard = lock(&app.state);
    let s = &mut *guard;
    let issuer = format!("{}/{TENANT_ID}/v2.0", app.base);
    let answer = grant(&mut s.identity, &form, (&issuer, &s.email));
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

fn grant(
    id: &mut Identity,
    form: &HashMap<String, String>,
    (issuer, email): (&str, &str),
) -> Result<Value, Refusal> {
    let grant = form
        .get("grant_type")
        .map(String::as_str)
        .unwrap_or_default();
    let scope = match grant {
        DEVICE_GRANT if id.confidential => {
            return Err(Refusal {
                status: StatusCode::UNAUTHORIZED,
                ..refuse(
                    "invalid_client",
                    "AADSTS7000218",
                    "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
                )
            });
        }
        DEVICE_GRANT => device_grant(id, form.get("device_code"))?,
        "authorization_code" => redeem(id, form)?,
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
    let (access, refresh, scope) = id.grant(&scope);
    let ttl = id.token_ttl.unwrap_or(Duration::from_secs(3600));
    let client = form.get("client_id").map_or("", String::as_str);
    Ok(json!({
        "token_type": "Bearer",
        "scope": scope,
        "expires_in": ttl.as_secs(),
        "access_token": access,
        "refresh_token": refresh,
        // What Microsoft adds for sign-in libraries that keep accounts (msal): who signed in.
        "id_token": id_token(issuer, client, email),
        "client_info": b64(&json!({ "uid": USER_ID, "utid": TENANT_ID })),
    }))
}

/// The signed-in user's object id and home tenant, as `client_info` and the id_token say.
const USER_ID: &str = "00000000-0000-0000-0000-00000000beef";
const TENANT_ID: &str = "9188040d-6c67-4c5b-b112-36a304b66dad";

fn b64(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

/// An unsigned id_token (`alg: none`): clients read its claims, and the TLS connection to the
/// token endpoint stands for its signature (OpenID Connect Core §3.1.3.7, item 6).
fn id_token(issuer: &str, client: &str, email: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let header = json!({ "alg": "none", "typ": "JWT" });
    let claims = json!({
        "iss": issuer, "aud": client, "sub": USER_ID, "oid": USER_ID, "tid": TENANT_ID,
        "iat": now, "nbf": now, "exp": now + 3600,
        "preferred_username": email, "name": "Mock User", "ver": "2.0",
    });
    format!("{}.{}.", b64(&header), b64(&claims))
}

/// `GET /{tenant}/v2.0/.well-known/openid-configuration`: where the tenant's endpoints are,
/// as sign-in libraries discover them.
pub async fn openid_configuration(
    AxState(app): AxState<App>,
    Path(tenant): Path<String>,
) -> Response {
    let root = format!("{}/{tenant}", app.base);
    axum::Json(json!({
        "issuer": format!("{}/{TENANT_ID}/v2.0", app.base),
        "authorization_endpoint": format!("{root}/oauth2/v2.0/authorize"),
        "token_endpoint": format!("{root}/oauth2/v2.0/token"),
        "device_authorization_endpoint": format!("{root}/oauth2/v2.0/devicecode"),
        "jwks_uri": format!("{root}/discovery/v2.0/keys"),
        "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
        "scopes_supported": ["openid", "profile", "email", "offline_access"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
        "tenant_region_scope": null,
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
pub struct AuthRequest {
    client_id: Option<String>,
    redirect_uri: String,
    response_type: String,
    scope: String,
    state: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
}

/// `GET /{tenant}/oauth2/v2.0/authorize`: the person signs in and consents at once, and the
/// browser is sent back to the app's redirect URI with a code (PKCE with S256 required, as
/// for a public client).
pub async fn authorize(
    AxState(app): AxState<App>,
    Path(_tenant): Path<String>,
    axum::extract::Query(req): axum::extract::Query<AuthRequest>,
) -> Response {
    if req.client_id.as_deref().is_none_or(str::is_empty) || req.response_type != "code" {
        return refuse(
            "invalid_request",
            "AADSTS900144",
            "client_id and response_type=code are required",
        )
        .into_response();
    }
    let (Some(challenge), Some("S256")) =
        (req.code_challenge, req.code_challenge_method.as_deref())
    else {
        return refuse("invalid_request", "AADSTS9002325", "Proof Key for Code Exchange is required for cross-origin authorization code redemption.").into_response();
    };
    let Ok(mut to) = url::Url::parse(&req.redirect_uri) else {
        return refuse(
            "invalid_request",
            "AADSTS50011",
            "The redirect URI is not valid.",
        )
        .into_response();
    };
    let mut s = lock(&app.state);
    let code = s.identity.next("code");
    s.identity.codes.insert(
        code.clone(),
        Code {
            challenge,
            redirect_uri: req.redirect_uri.clone(),
            scope: req.scope,
        },
    );
    to.query_pairs_mut().append_pair("code", &code);
    if let Some(state) = &req.state {
        to.query_pairs_mut().append_pair("state", state);
    }
    (
        StatusCode::FOUND,
        [(axum::http::header::LOCATION, to.to_string())],
    )
        .into_response()
}

/// Redeems an authorization code: the verifier must hash to the challenge, and the redirect
/// URI must be the one the code was issued for.
fn redeem(id: &mut Identity, form: &HashMap<String, String>) -> Result<String, Refusal> {
    use base64::Engine;
    use sha2::Digest;
    let code = form
        .get("code")
        .and_then(|c| id.codes.remove(c))
        .ok_or_else(|| {
            refuse(
                "invalid_grant",
                "AADSTS70000",
                "The provided authorization code is invalid or has been used.",
            )
        })?;
    let verifier = form.get("code_verifier").map_or("", String::as_str);
    let digest = sha2::Sha256::digest(verifier.as_bytes());
    if base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest) != code.challenge {
        return Err(refuse(
            "invalid_grant",
            "AADSTS501481",
            "The Code_Verifier does not match the code_challenge supplied in the authorization request.",
        ));
    }
    if form.get("redirect_uri") != Some(&code.redirect_uri) {
        return Err(refuse(
            "invalid_grant",
            "AADSTS50011",
            "The redirect URI does not match the one the code was issued for.",
        ));
    }
    Ok(code.scope)
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
