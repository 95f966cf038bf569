//! mailbroker as its own OAuth 2.1 authorization server, for hosted MCP clients (claude.ai,
//! ChatGPT) that connect by the MCP authorization spec and have no place to paste a token.
//! `/mcp` is the protected resource (RFC 9728 metadata, `WWW-Authenticate` on a 401); this
//! server issues tokens for it alone (RFC 8707). Clients make themselves known by a client id
//! metadata document (an https URL, `client.rs`) or by registering (RFC 7591); the
//! authorization code flow takes PKCE S256 only (`flow.rs`); the person consents in the
//! console, with their passkey, choosing the accounts and read-only or read-write
//! (`console::grant`). Codes and tokens are kept only as digests; access tokens live an hour,
//! refresh tokens are used once and replaced.
//!
//! No maintained Rust crate serves this side of OAuth for axum; what is cryptography (PKCE's
//! S256) is the oauth2 crate's, and the rest is the handful of checks the RFCs name.

mod client;
mod flow;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::store::Store;

pub use client::{DocumentPolicy, Registration};
pub use flow::back_to;

/// What `serve` was told of OAuth.
#[derive(Debug, Clone, Default)]
pub struct OAuthOptions {
    pub registration: Registration,
    pub documents: DocumentPolicy,
}

/// Where this server is and what it takes.
#[derive(Clone)]
pub struct Issuer {
    /// The origin clients and browsers reach it at (`serve --public-url`), no trailing slash.
    pub url: String,
    pub registration: Registration,
    pub documents: Arc<DocumentPolicy>,
    pub store: Store,
}

impl Issuer {
    /// The protected resource: this server's MCP endpoint.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// Where a client learns how to get a token for `/mcp` (RFC 9728).
    pub fn resource_metadata(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.url)
    }

    /// Whom an access token of this issuer lets in: its grant's accounts, read-only or
    /// read-write; nothing for a token issued for another resource.
    pub async fn scope_of(&self, presented: &str) -> Option<crate::scope::Scope> {
        match self.store.grant_of_access(presented).await {
            Ok(Some(grant)) if grant.resource == self.resource() => {
                Some(crate::scope::Scope::Accounts {
                    accounts: grant.accounts.into_iter().collect(),
                    allow_writes: grant.allow_writes,
                })
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "OAuth grants could not be read; refused");
                None
            }
        }
    }

    /// What a 401 on `/mcp` says (RFC 9728 §5.1).
    pub fn challenge(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&format!(
            "Bearer resource_metadata=\"{}\"",
            self.resource_metadata()
        ))
        .ok()
    }
}

pub fn router(issuer: Issuer) -> Router {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(server_metadata),
        )
        .route("/oauth/register", post(client::register))
        .route("/oauth/authorize", get(flow::authorize))
        .route("/oauth/token", post(flow::token))
        .with_state(issuer)
}

fn no_store(body: serde_json::Value) -> Response {
    let mut r = Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn protected_resource(State(i): State<Issuer>) -> Response {
    Json(json!({
        "resource": i.resource(),
        "authorization_servers": [i.url],
        "bearer_methods_supported": ["header"],
        "resource_name": "mailbroker",
    }))
    .into_response()
}

async fn server_metadata(State(i): State<Issuer>) -> Response {
    let mut meta = json!({
        "issuer": i.url,
        "authorization_endpoint": format!("{}/oauth/authorize", i.url),
        "token_endpoint": format!("{}/oauth/token", i.url),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": i.registration.documents(),
    });
    if i.registration.dynamic() {
        meta["registration_endpoint"] = json!(format!("{}/oauth/register", i.url));
    }
    Json(meta).into_response()
}

/// An OAuth error answer (RFC 6749 §5.2): `error`, and a description a person can read.
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    let mut r = (
        status,
        Json(json!({ "error": error, "error_description": description })),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
