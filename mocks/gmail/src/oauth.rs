//! Google's OAuth endpoints as the mock plays them: an authorization endpoint that approves at
//! once (redirecting with a code), a token endpoint that checks PKCE (S256) and refreshes, and
//! revocation.

use axum::Form;
use axum::Json;
use axum::extract::{Query, State as AxState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::api::Shared;
use crate::state::{Grant, random_hex};

#[derive(Deserialize)]
pub struct AuthRequest {
    redirect_uri: String,
    state: Option<String>,
    scope: String,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    response_type: String,
}

fn oauth_error(status: StatusCode, code: &str, description: &str) -> Response {
    (
        status,
        Json(json!({ "error": code, "error_description": description })),
    )
        .into_response()
}

/// `GET /o/oauth2/v2/auth`: the user "consents" at once.
pub async fn authorize(
    AxState(state): AxState<Shared>,
    Query(req): Query<AuthRequest>,
) -> Response {
    if req.response_type != "code" {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_response_type",
            "only code",
        );
    }
    let (Some(challenge), Some("S256")) =
        (req.code_challenge, req.code_challenge_method.as_deref())
    else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "PKCE with S256 is required",
        );
    };
    let code = random_hex(16);
    let grant = Grant {
        challenge,
        redirect_uri: req.redirect_uri.clone(),
        scope: req.scope,
    };
    crate::lock(&state).codes.insert(code.clone(), grant);
    let sep = if req.redirect_uri.contains('?') {
        '&'
    } else {
        '?'
    };
    let mut location = format!("{}{sep}code={code}", req.redirect_uri);
    if let Some(s) = req.state {
        location.push_str(&format!("&state={s}"));
    }
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

#[derive(Deserialize)]
pub struct TokenRequest {
    grant_type: String,
    code: Option<String>,
    code_verifier: Option<String>,
    redirect_uri: Option<String>,
    refresh_token: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// The client a token request names, in its body or as HTTP Basic credentials (RFC 6749
/// §2.3.1; Google takes either), checked as Google checks a Desktop app client: known, and
/// with its secret (which Google issues to every such client and requires, though it is not
/// confidential). `Some`: the refusal.
fn client_refusal(
    s: &crate::state::State,
    headers: &axum::http::HeaderMap,
    req: &TokenRequest,
) -> Option<Response> {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|pair| {
            let (id, secret) = pair.split_once(':')?;
            let decode = |v: &str| {
                url::form_urlencoded::parse(format!("v={v}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
            };
            Some((decode(id)?, decode(secret)?))
        });
    let (id, secret) = match basic {
        Some((id, secret)) => (Some(id), Some(secret)),
        None => (req.client_id.clone(), req.client_secret.clone()),
    };
    let Some(known) = id.as_ref().and_then(|id| s.clients.get(id)) else {
        return Some(oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "The OAuth client was not found.",
        ));
    };
    match secret {
        None => Some(oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "client_secret is missing.",
        )),
        Some(given) if &given != known => Some(oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "Unauthorized",
        )),
        Some(_) => None,
    }
}

/// `POST /token`.
pub async fn token(
    AxState(state): AxState<Shared>,
    headers: axum::http::HeaderMap,
    Form(req): Form<TokenRequest>,
) -> Response {
    let mut s = crate::lock(&state);
    if let Some(refused) = client_refusal(&s, &headers, &req) {
        return refused;
    }
    let scopes: Vec<String> = match req.grant_type.as_str() {
        "authorization_code" => {
            let Some(grant) = req.code.as_ref().and_then(|c| s.codes.remove(c)) else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "unknown or used code",
                );
            };
            let verifier = req.code_verifier.unwrap_or_default();
            let digest = Sha256::digest(verifier.as_bytes());
            let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if expected != grant.challenge {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "code_verifier does not match",
                );
            }
            if req.redirect_uri.as_deref() != Some(grant.redirect_uri.as_str()) {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "redirect_uri mismatch",
                );
            }
            grant.scope.split_whitespace().map(str::to_string).collect()
        }
        "refresh_token" => {
            let Some(scopes) = req
                .refresh_token
                .as_ref()
                .and_then(|r| s.refresh_tokens.get(r))
                .cloned()
            else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "Token has been expired or revoked.",
                );
            };
            s.refreshes += 1;
            scopes
        }
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "unsupported",
            );
        }
    };
    let refresh = match req.grant_type.as_str() {
        "authorization_code" => {
            let r = format!("1//mock-{}", random_hex(16));
            s.refresh_tokens.insert(r.clone(), scopes.clone());
            Some(r)
        }
        _ => None,
    };
    let minted_by = refresh.clone().or(req.refresh_token.clone());
    let access = s.mint_token(scopes.clone(), minted_by);
    let ttl = s.token_ttl;
    let mut body = json!({
        "access_token": access, "token_type": "Bearer",
        "expires_in": ttl.as_secs(), "scope": scopes.join(" "),
    });
    if let Some(r) = refresh {
        body["refresh_token"] = r.into();
    }
    Json(body).into_response()
}

#[derive(Deserialize)]
pub struct Revoke {
    token: String,
}

/// `POST /revoke`: a refresh token and every access token it minted stop working.
pub async fn revoke(AxState(state): AxState<Shared>, Form(req): Form<Revoke>) -> Response {
    let mut s = crate::lock(&state);
    s.refresh_tokens.remove(&req.token);
    s.tokens
        .retain(|t, tok| *t != req.token && tok.refresh.as_deref() != Some(req.token.as_str()));
    StatusCode::OK.into_response()
}
