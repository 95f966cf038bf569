//! The authorization code flow: `GET /oauth/authorize` checks the request and hands it to the
//! console, where the person decides (`console::grant`); `POST /oauth/token` redeems the code
//! (once, with its PKCE verifier, for the redirect URI and resource it was issued for) and
//! renews tokens by a refresh token (used once, replaced). An error before the client and
//! its redirect URI are known is shown, never sent to a URI the client did not register.

use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;

use super::{Issuer, client, no_store, oauth_error};
use crate::store::{ACCESS_SECS, AuthRequest, Grant, now_secs};

#[derive(Deserialize)]
pub(super) struct AuthorizeParams {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    resource: Option<String>,
}

/// An authorization request this server cannot even answer to its client: shown to the
/// person in the browser.
fn shown(why: &str) -> Response {
    let text = format!("mailbroker cannot take this sign-in request: {why}\n");
    (StatusCode::BAD_REQUEST, text).into_response()
}

/// Where the browser goes back to the client: `redirect_uri` with `params`, the state and
/// this issuer (RFC 9207).
pub fn back_to(
    redirect_uri: &str,
    params: &[(&str, &str)],
    state: Option<&str>,
    iss: &str,
) -> String {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return redirect_uri.to_string();
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
        if let Some(state) = state {
            q.append_pair("state", state);
        }
        q.append_pair("iss", iss);
    }
    url.to_string()
}

pub(super) async fn authorize(
    State(i): State<Issuer>,
    Query(p): Query<AuthorizeParams>,
) -> Response {
    let Some(client_id) = p.client_id.as_deref() else {
        return shown("no client_id");
    };
    let client = match client::resolve(&i, client_id).await {
        Ok(c) => c,
        Err(why) => return shown(&why),
    };
    let redirect_uri = match (&p.redirect_uri, client.redirect_uris.as_slice()) {
        (Some(uri), uris) if uris.contains(uri) => uri.clone(),
        (None, [only]) => only.clone(),
        (Some(uri), _) => {
            return shown(&format!("{uri:?} is not a redirect URI the client named"));
        }
        (None, _) => return shown("no redirect_uri"),
    };
    let refuse = |error: &str, why: &str| {
        let to = back_to(
            &redirect_uri,
            &[("error", error), ("error_description", why)],
            p.state.as_deref(),
            &i.url,
        );
        Redirect::to(&to).into_response()
    };
    if p.response_type.as_deref() != Some("code") {
        return refuse(
            "unsupported_response_type",
            "only response_type=code is served",
        );
    }
    let challenge = p.code_challenge.clone().unwrap_or_default();
    let pkce =
        p.code_challenge_method.as_deref() == Some("S256") && (43..=128).contains(&challenge.len());
    if !pkce {
        return refuse(
            "invalid_request",
            "PKCE with code_challenge_method=S256 is required",
        );
    }
    let resource = p.resource.clone().unwrap_or_else(|| i.resource());
    if resource.trim_end_matches('/') != i.resource() {
        return refuse(
            "invalid_target",
            "tokens here are for this server's /mcp only",
        );
    }
    let Ok(id) = crate::util::random_hex(16) else {
        return refuse("server_error", "no randomness");
    };
    let request = AuthRequest {
        id: id.clone(),
        client_id: client.client_id,
        redirect_uri: redirect_uri.clone(),
        state: p.state.clone(),
        code_challenge: challenge,
        resource: i.resource(),
        created_at: now_secs(),
    };
    if let Err(e) = i.store.add_auth_request(&request).await {
        return refuse("server_error", &e.to_string());
    }
    Redirect::to(&format!("/console/grant/{id}")).into_response()
}

#[derive(Deserialize)]
pub(super) struct TokenParams {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    resource: Option<String>,
}

fn invalid_grant(why: &str) -> Response {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", why)
}

/// Whether `verifier` is the one `challenge` was made from (S256).
fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    // RFC 7636 §4.1's lengths, checked first: the oauth2 crate asserts them.
    if !(43..=128).contains(&verifier.len()) {
        return false;
    }
    let made =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.into()));
    bool::from(made.as_str().as_bytes().ct_eq(challenge.as_bytes()))
}

/// A fresh access and refresh token of `grant`.
async fn tokens(i: &Issuer, grant: &Grant) -> Response {
    let (Ok(access), Ok(refresh)) = (crate::util::random_hex(32), crate::util::random_hex(32))
    else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no randomness",
        );
    };
    let (access, refresh) = (format!("mba_{access}"), format!("mbr_{refresh}"));
    if let Err(e) = i.store.add_grant_tokens(grant.id, &access, &refresh).await {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            &e.to_string(),
        );
    }
    no_store(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_SECS,
        "refresh_token": refresh,
    }))
}

pub(super) async fn token(State(i): State<Issuer>, Form(p): Form<TokenParams>) -> Response {
    let Some(client_id) = p.client_id.as_deref() else {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "no client_id");
    };
    let grant = match p.grant_type.as_deref() {
        Some("authorization_code") => {
            let (Some(code), Some(verifier)) = (&p.code, &p.code_verifier) else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "code and code_verifier are required",
                );
            };
            let (grant, redirect_uri, challenge) = match i.store.redeem_code(code).await {
                Ok(found) => found,
                Err(e) => return invalid_grant(&e.to_string()),
            };
            if grant.client_id != client_id
                || p.redirect_uri.as_deref().is_some_and(|u| u != redirect_uri)
                || !pkce_matches(verifier, &challenge)
            {
                // The code is spent: whoever holds it now has nothing.
                let _ = i.store.revoke_grant(grant.id).await;
                return invalid_grant(
                    "the code was not issued to this client, redirect URI and verifier",
                );
            }
            grant
        }
        Some("refresh_token") => {
            let Some(refresh) = &p.refresh_token else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "refresh_token is required",
                );
            };
            match i.store.take_refresh(refresh).await {
                Ok(grant) if grant.client_id == client_id => grant,
                Ok(grant) => {
                    let _ = i.store.revoke_grant(grant.id).await;
                    return invalid_grant("the refresh token is not this client's");
                }
                Err(e) => return invalid_grant(&e.to_string()),
            }
        }
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "authorization_code or refresh_token",
            );
        }
    };
    if p.resource
        .as_deref()
        .is_some_and(|r| r.trim_end_matches('/') != grant.resource)
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "tokens here are for this server's /mcp only",
        );
    }
    tokens(&i, &grant).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_takes_the_verifier_its_challenge_was_made_from() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXX",
            challenge
        ));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn the_way_back_carries_state_and_issuer() {
        let to = back_to(
            "https://c.example/cb?x=1",
            &[("code", "abc")],
            Some("s t"),
            "http://localhost:1",
        );
        assert_eq!(
            to,
            "https://c.example/cb?x=1&code=abc&state=s+t&iss=http%3A%2F%2Flocalhost%3A1"
        );
    }
}
