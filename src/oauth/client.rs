//! Who a client is: one that registered here (RFC 7591, `/oauth/register`), or one known by
//! its client id metadata document, the JSON at the https URL that is its id. A document is
//! fetched with a time and size limit, without redirects, only over https and never from a
//! private or loopback address unless the person trusted that origin (`DocumentPolicy`), and
//! kept for an hour. Either way a client is public (no secret: PKCE stands for it) and may be
//! sent back only to a redirect URI it named, https or http on this machine.

use std::net::IpAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{Issuer, oauth_error};
use crate::store::{ClientKind, OAuthClient, now_secs};

/// Which ways of making a client known this server takes (`--oauth-registration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Registration {
    /// Client id metadata documents only.
    Cimd,
    /// Dynamic Client Registration only.
    Dcr,
    #[default]
    Both,
    /// No OAuth clients (bearer tokens only).
    None,
}

impl Registration {
    pub fn documents(self) -> bool {
        matches!(self, Registration::Cimd | Registration::Both)
    }

    pub fn dynamic(self) -> bool {
        matches!(self, Registration::Dcr | Registration::Both)
    }
}

/// Where client documents may come from beyond the public https web.
#[derive(Debug, Clone, Default)]
pub struct DocumentPolicy {
    /// Origins (`https://host:port`) fetched even at a private or loopback address.
    pub trusted_origins: Vec<String>,
    /// A CA (PEM) trusted beside the public roots for them.
    pub ca_pem: Option<Vec<u8>>,
}

/// Largest client document read, and how long one may take.
const MAX_DOCUMENT: usize = 5 * 1024;
const FETCH_WITHIN: Duration = Duration::from_secs(5);
/// How long a document read is used before it is read again.
const KEEP_DOCUMENT_SECS: i64 = 3600;
const MAX_REDIRECT_URIS: usize = 10;
const MAX_NAME: usize = 200;

/// A redirect URI a client may name: https, or http to this machine (a native app's
/// listener); no fragment, no credentials in it.
pub fn redirect_uri_ok(uri: &str) -> bool {
    let Ok(url) = url::Url::parse(uri) else {
        return false;
    };
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let scheme = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    scheme && url.fragment().is_none() && url.username().is_empty() && url.password().is_none()
}

fn name_of(name: Option<String>, fallback: &str) -> String {
    let name: String = (name.unwrap_or_default().chars())
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect();
    match name.trim().is_empty() {
        true => fallback.to_string(),
        false => name.trim().to_string(),
    }
}

#[derive(Deserialize)]
pub(super) struct Metadata {
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    redirect_uris: Vec<String>,
    client_name: Option<String>,
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
}

impl Metadata {
    /// What of this client's metadata this server cannot take, in RFC 7591's terms.
    fn refusal(&self) -> Option<(&'static str, String)> {
        if self.redirect_uris.is_empty() || self.redirect_uris.len() > MAX_REDIRECT_URIS {
            return Some((
                "invalid_redirect_uri",
                format!("give 1 to {MAX_REDIRECT_URIS} redirect_uris"),
            ));
        }
        if let Some(bad) = self.redirect_uris.iter().find(|u| !redirect_uri_ok(u)) {
            return Some((
                "invalid_redirect_uri",
                format!("{bad:?} is not an https URI or an http one on this machine"),
            ));
        }
        if self
            .token_endpoint_auth_method
            .as_deref()
            .is_some_and(|m| m != "none")
        {
            return Some((
                "invalid_client_metadata",
                "clients here are public: token_endpoint_auth_method is \"none\"".into(),
            ));
        }
        let grants_ok = (self.grant_types.iter().flatten())
            .all(|g| g == "authorization_code" || g == "refresh_token");
        let responses_ok = self.response_types.iter().flatten().all(|r| r == "code");
        if !grants_ok || !responses_ok {
            return Some((
                "invalid_client_metadata",
                "only the authorization code grant (with refresh tokens) is served".into(),
            ));
        }
        None
    }
}

/// `POST /oauth/register` (RFC 7591): a public client, with the redirect URIs it named.
pub(super) async fn register(State(i): State<Issuer>, body: axum::body::Bytes) -> Response {
    if !i.registration.dynamic() {
        return oauth_error(
            StatusCode::FORBIDDEN,
            "access_denied",
            "this server does not register clients; use a client id metadata document",
        );
    }
    let meta: Metadata = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                &e.to_string(),
            );
        }
    };
    if let Some((error, why)) = meta.refusal() {
        return oauth_error(StatusCode::BAD_REQUEST, error, &why);
    }
    let Ok(id) = crate::util::random_hex(16) else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no randomness",
        );
    };
    let now = now_secs();
    let client = OAuthClient {
        client_id: format!("mb-{id}"),
        kind: ClientKind::Registered,
        name: name_of(meta.client_name, "an unnamed client"),
        redirect_uris: meta.redirect_uris,
        created_at: now,
        fetched_at: now,
    };
    if let Err(e) = i.store.put_oauth_client(&client).await {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            &e.to_string(),
        );
    }
    let answer = json!({
        "client_id": client.client_id,
        "client_id_issued_at": now,
        "client_name": client.name,
        "redirect_uris": client.redirect_uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    (StatusCode::CREATED, super::no_store(answer)).into_response()
}

/// The client `client_id` names: registered here, or read from its document.
pub(super) async fn resolve(i: &Issuer, client_id: &str) -> Result<OAuthClient, String> {
    let known = i
        .store
        .oauth_client(client_id)
        .await
        .map_err(|e| e.to_string())?;
    match known {
        Some(c) if c.kind == ClientKind::Registered && i.registration.dynamic() => Ok(c),
        Some(c)
            if c.kind == ClientKind::Document && c.fetched_at > now_secs() - KEEP_DOCUMENT_SECS =>
        {
            Ok(c)
        }
        _ if client_id.starts_with("https://") && i.registration.documents() => {
            let client = fetch(&i.documents, client_id).await?;
            i.store
                .put_oauth_client(&client)
                .await
                .map_err(|e| e.to_string())?;
            Ok(client)
        }
        _ => Err(format!("{client_id:?} is not a client this server knows")),
    }
}

/// An address a document must not be fetched from: this machine, a private network,
/// link-local and the like (a client id could otherwise make this server probe them).
fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| private(IpAddr::V4(v4)))
        }
    }
}

/// Reads the client document at `url`, within `policy`.
async fn fetch(policy: &DocumentPolicy, url: &str) -> Result<OAuthClient, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("the client id {url:?}: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or("the client id names no host")?
        .to_string();
    if parsed.scheme() != "https"
        || parsed.path() == "/"
        || parsed.fragment().is_some()
        || !parsed.username().is_empty()
    {
        return Err(format!(
            "the client id {url:?} is not an https URL of a document"
        ));
    }
    let port = parsed.port_or_known_default().unwrap_or(443);
    let origin = parsed.origin().ascii_serialization();
    let trusted = policy
        .trusted_origins
        .iter()
        .any(|o| o.trim_end_matches('/') == origin);
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("the client's host {host} cannot be found: {e}"))?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(format!("the client's host {host} has no address"));
    };
    if !trusted && addrs.iter().any(|a| private(a.ip())) {
        return Err(format!(
            "the client's document is at a private or loopback address ({}); it is not fetched",
            addr.ip()
        ));
    }
    // Connect to the address checked, so a second lookup cannot point elsewhere.
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_WITHIN)
        .resolve(&host, addr);
    if let (true, Some(pem)) = (trusted, &policy.ca_pem) {
        for ca in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())? {
            builder = builder.add_root_certificate(ca);
        }
    }
    let http = builder.build().map_err(|e| e.to_string())?;
    let mut answer = http
        .get(url)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("the client's document could not be read: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!(
            "the client's document answered {}",
            answer.status()
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT {
            return Err(format!(
                "the client's document is larger than {MAX_DOCUMENT} bytes"
            ));
        }
    }
    let meta: Metadata =
        serde_json::from_slice(&body).map_err(|e| format!("the client's document: {e}"))?;
    if meta.client_id.as_deref() != Some(url) {
        return Err("the client's document names another client_id than its own URL".into());
    }
    if let Some((_, why)) = meta.refusal() {
        return Err(format!("the client's document: {why}"));
    }
    let now = now_secs();
    Ok(OAuthClient {
        client_id: url.to_string(),
        kind: ClientKind::Document,
        name: name_of(meta.client_name, &host),
        redirect_uris: meta.redirect_uris,
        created_at: now,
        fetched_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_this_machines_http() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost/cb",
        ] {
            assert!(redirect_uri_ok(ok), "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "https://a.example/cb#frag",
            "https://user:pw@a.example/cb",
            "javascript:alert(1)",
            "myapp://cb",
        ] {
            assert!(!redirect_uri_ok(bad), "{bad}");
        }
    }

    #[test]
    fn private_and_loopback_addresses_are_never_fetched() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "100.64.0.1",
        ] {
            assert!(private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1"] {
            assert!(!private(ip.parse().unwrap()), "{ip}");
        }
    }
}
