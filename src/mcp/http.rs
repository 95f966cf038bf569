//! `mailbroker mcp --http`: Streamable HTTP at `/mcp`, behind a bearer token, Host and Origin
//! checks, loopback only unless asked otherwise.
//!
//! Architecture Invariant: no request reaches a tool without a bearer token we hold — the
//! home's own (compared in constant time), which opens every account, or a scoped one
//! (`mailbroker token create`, found by its digest), which opens its accounts only — and,
//! when it carries an Origin, one that names this listener on loopback. The request carries
//! its `Scope` to the tools (`scope_of`). Tokens are never printed or logged; `mcp status`
//! shows where the home's is kept.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::sessions::{SessionLimits, Sessions};
use super::{McpOptions, McpServer};
use crate::home::Home;
use crate::scope::Scope;
use crate::store::Store;
use mailbroker_core::{Error, Result};

/// Environment variable that may hold the bearer token.
pub const TOKEN_ENV: &str = "MAILBROKER_MCP_TOKEN";

#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `PORT`, `HOST:PORT` or `IP:PORT`; a bare port binds 127.0.0.1.
    pub addr: String,
    pub allow_remote: bool,
    pub token_file: Option<PathBuf>,
    pub mcp: McpOptions,
    pub sessions: SessionLimits,
    /// Where the person's console is shown beside `/mcp` (`serve`'s).
    pub console: crate::console::ConsoleAt,
    /// How hosted clients get tokens, where the console is shown (its origin is the issuer).
    pub oauth: crate::oauth::OAuthOptions,
}

/// A running listener, as `mcp status` reports it (never the token).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listener {
    pub url: String,
    /// The person's console beside it, if it shows one (`serve`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
    pub pid: u32,
    /// Where the token is kept: a file path, or the environment variable's name.
    pub token_source: String,
    pub writes: bool,
}

/// Parses the bind address; a non-loopback one needs `allow_remote`.
pub fn bind_addr(addr: &str, allow_remote: bool) -> Result<SocketAddr> {
    let parsed = match addr.parse::<u16>() {
        Ok(port) => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        Err(_) => {
            let addr = addr.replace("localhost", "127.0.0.1");
            addr.parse::<SocketAddr>().map_err(|_| {
                Error::validation(format!("{addr:?} is not a port or an IP:PORT address"))
                    .with_next_step("use e.g. --http 8765 or --http 127.0.0.1:8765")
            })?
        }
    };
    if !parsed.ip().is_loopback() && !allow_remote {
        return Err(Error::validation(format!(
            "{parsed} is reachable from other machines; refusing to serve mail there"
        ))
        .with_next_step("bind a loopback address, or add --http-allow-remote if you mean it"));
    }
    Ok(parsed)
}

/// Shortest bearer token accepted, from a file or the environment.
const MIN_TOKEN_LEN: usize = 16;

/// The bearer token and where it comes from: the given file, the environment, or a file
/// generated (0600) in the home on first use. A token shorter than `MIN_TOKEN_LEN`, or a
/// file others may read, is refused: either lets someone else in. The home's own file is
/// ours to replace: an empty or weak one (a first start on a full disk leaves it empty) is
/// generated again rather than trusted.
fn load_token(home: &Home, file: Option<&PathBuf>) -> Result<(String, String)> {
    if let Some(path) = file {
        let text = crate::util::read_private(path, "token file")?;
        let source = path.display().to_string();
        return strong(text.trim(), &source).map(|t| (t, source));
    }
    if let Ok(token) = std::env::var(TOKEN_ENV)
        && !token.trim().is_empty()
    {
        return strong(token.trim(), &format!("${TOKEN_ENV}"))
            .map(|t| (t, format!("${TOKEN_ENV}")));
    }
    let path = home.root().join("mcp-token");
    let source = path.display().to_string();
    if let Ok(text) = std::fs::read_to_string(&path) {
        if let Ok(token) = strong(text.trim(), &source) {
            crate::util::check_private(&path, "token file")?;
            return Ok((token, source));
        }
        tracing::warn!("{source} held no usable token; a new one is generated");
    }
    let token = crate::util::random_hex(32)?;
    crate::util::write_private(&path, format!("{token}\n").as_bytes())?;
    Ok((token, source))
}

/// `token` if it is long enough to guess at no better than chance.
fn strong(token: &str, source: &str) -> Result<String> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(Error::validation(format!(
            "the token in {source} is shorter than {MIN_TOKEN_LEN} characters"
        ))
        .with_next_step("use a longer random token, or leave it out to have one generated"));
    }
    Ok(token.to_string())
}

#[derive(Clone)]
struct Gate {
    token: Arc<String>,
    /// Where scoped tokens are looked up.
    store: Store,
    /// Origins a browser on this machine would send for this listener.
    origins: Arc<Vec<String>>,
    /// This server as an OAuth issuer, whose access tokens open it too.
    issuer: Option<crate::oauth::Issuer>,
}

async fn guard(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| gate.origins.iter().any(|allowed| allowed == o));
        if !ok {
            return (StatusCode::FORBIDDEN, "origin not allowed\n").into_response();
        }
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .unwrap_or("");
    let Some(scope) = gate.scope(presented).await else {
        let mut response =
            (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
        let challenge = (gate.issuer.as_ref())
            .and_then(crate::oauth::Issuer::challenge)
            .unwrap_or(HeaderValue::from_static("Bearer realm=\"mailbroker\""));
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
        return response;
    };
    request.extensions_mut().insert(scope);
    let ends_session = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    // The transport answers a session's end with 202, which some clients treat as "still
    // pending"; the session is gone by then, and 204 says so.
    if ends_session && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
    }
    response
}

impl Gate {
    /// Whom a bearer value lets in: the owner, a scoped token's accounts, or no one.
    async fn scope(&self, presented: &str) -> Option<Scope> {
        // An empty token is never one we hold, whatever went wrong in loading ours.
        if presented.is_empty() {
            return None;
        }
        if bool::from(presented.as_bytes().ct_eq(self.token.as_bytes())) {
            return Some(Scope::Owner);
        }
        let scoped = match self.store.access_token(presented).await {
            Ok(token) => token.map(|t| Scope::Accounts {
                accounts: t.accounts.into_iter().collect(),
                allow_writes: t.allow_writes,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "scoped tokens could not be read; refused");
                None
            }
        };
        match (scoped, &self.issuer) {
            (Some(scope), _) => Some(scope),
            (None, Some(issuer)) => issuer.scope_of(presented).await,
            (None, None) => None,
        }
    }
}

/// The scope a tool call runs in: the one its HTTP request's token gave; over stdio, with
/// no HTTP request, the owner's (the person's own process).
pub(super) fn scope_of(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Scope {
    match context.extensions.get::<axum::http::request::Parts>() {
        None => Scope::Owner,
        // `guard` puts one on every request it lets through; none means nothing opens.
        Some(parts) => {
            parts
                .extensions
                .get::<Scope>()
                .cloned()
                .unwrap_or_else(|| Scope::Accounts {
                    accounts: Default::default(),
                    allow_writes: false,
                })
        }
    }
}

/// The credentials of a `Bearer` Authorization value; the scheme is case-insensitive
/// (RFC 7235 §2.1), so `bearer x` and `BEARER x` are the same as `Bearer x`.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim_start_matches(' '))
}

fn listeners_dir(home: &Home) -> PathBuf {
    home.root().join("mcp-listeners")
}

/// Running HTTP listeners of this home; entries of processes that are gone are removed.
pub fn listeners(home: &Home) -> Result<Vec<Listener>> {
    let dir = listeners_dir(home);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let parsed: Option<Listener> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        match parsed {
            Some(l) if crate::util::running(l.pid) => out.push(l),
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    out.sort_by_key(|l| l.pid);
    Ok(out)
}

/// A listener on `addr`, and the address it got (its port, where `addr` asked for any).
pub async fn listen(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::validation(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::internal(e.to_string()))?;
    Ok((listener, local))
}

/// A bound listener, ready to serve.
pub struct Bound {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    record: Listener,
    entry: PathBuf,
    cancel: tokio_util::sync::CancellationToken,
}

/// Binds the listener and builds the app: address checks, token, Host/Origin allow-lists.
pub async fn bind(home: Home, store: Store, options: HttpOptions) -> Result<Bound> {
    let addr = bind_addr(&options.addr, options.allow_remote)?;
    let (token, token_source) = load_token(&home, options.token_file.as_ref())?;
    let (listener, local) = listen(addr).await?;
    let port = local.port();
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "[::1]".to_string(),
    ];
    names.push(match local.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    });
    // This listener's port too: a page served by another local port must not reach it.
    let mut hosts: Vec<String> = names.iter().map(|h| format!("{h}:{port}")).collect();
    let console = options.console.origin(port)?;
    // Behind a TLS-terminating proxy, the public name is this server's too.
    if let Some(public) = console.as_ref().map(crate::console::Origin::host)
        && !hosts.iter().any(|h| h == public)
    {
        hosts.push(public.to_string());
    }
    let origins: Vec<String> = hosts
        .iter()
        .flat_map(|h| [format!("http://{h}"), format!("https://{h}")])
        .collect();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(cancel.clone());
    config.session_store = Some(Arc::new(super::sessions::Shared(store.clone())));
    let writes = options.mcp.allow_writes;
    let work = options.mcp.work.clone();
    let mut mcp = options.mcp;
    if let Some(origin) = &console {
        // A write waits for the person in this listener's own console.
        mcp.console = origin.url.clone();
        mcp.approvals = mcp.approvals.at(&origin.url);
    }
    let server = McpServer::new(home.clone(), store.clone(), mcp);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(Sessions::new(options.sessions, store.clone())),
        config,
    );
    let issuer = match (&console, options.oauth.registration) {
        (Some(origin), registration) if registration != crate::oauth::Registration::None => {
            Some(crate::oauth::Issuer {
                url: origin.url.clone(),
                registration,
                documents: Arc::new(options.oauth.documents),
                store: store.clone(),
            })
        }
        _ => None,
    };
    let gate = Gate {
        token: Arc::new(token),
        store: store.clone(),
        origins: Arc::new(origins),
        issuer: issuer.clone(),
    };
    let mut app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(gate, guard));
    if let Some(issuer) = issuer {
        app = app.merge(crate::oauth::router(issuer));
    }
    // Beside `/mcp`, not behind its bearer token: the console has its own sign-in and guard.
    let console_url = console.as_ref().map(|o| format!("{}/console", o.url));
    if let Some(origin) = console {
        app = app.merge(crate::console::router(crate::console::Console {
            home: home.clone(),
            store,
            origin,
            work,
            running: Default::default(),
        }));
    }
    let record = Listener {
        console: console_url,
        url: format!("http://{local}/mcp"),
        pid: std::process::id(),
        token_source,
        writes,
    };
    let entry = listeners_dir(&home).join(format!("{}.json", record.pid));
    Ok(Bound {
        listener,
        app,
        record,
        entry,
        cancel,
    })
}

impl Bound {
    pub fn url(&self) -> &str {
        &self.record.url
    }

    /// The person's console beside it, if it shows one.
    pub fn console(&self) -> Option<&str> {
        self.record.console.as_deref()
    }

    /// Where its token is and whether writes are allowed, for the line a person reads.
    pub fn describe(&self) -> String {
        format!(
            "bearer token: {}; writes {}",
            self.record.token_source,
            if self.record.writes {
                "allowed"
            } else {
                "disabled"
            }
        )
    }

    /// Serves until `shutdown` completes; registered for `mcp status` meanwhile.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        if let Some(dir) = self.entry.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let text =
            serde_json::to_string(&self.record).map_err(|e| Error::internal(e.to_string()))?;
        let _ = std::fs::write(&self.entry, text);
        let cancel = self.cancel.clone();
        // Answers are small and often streamed as several writes (SSE): without NODELAY each
        // one can wait ≈ 40 ms for the client's delayed ACK.
        let listener = axum::serve::ListenerExt::tap_io(self.listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let served = axum::serve(listener, self.app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                cancel.cancel();
            })
            .await;
        let _ = std::fs::remove_file(&self.entry);
        served.map_err(|e| Error::internal(format!("HTTP server failed: {e}")))
    }
}

/// Completes on SIGINT or SIGTERM.
pub async fn signalled() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Serves until SIGINT/SIGTERM.
pub async fn serve(home: Home, store: Store, options: HttpOptions) -> Result<()> {
    let bound = bind(home, store, options).await?;
    eprintln!(
        "mailbroker MCP listening on {} ({})",
        bound.url(),
        bound.describe()
    );
    bound.run(signalled()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_ports_bind_loopback_and_remote_needs_a_flag() {
        assert_eq!(
            bind_addr("8765", false).unwrap().to_string(),
            "127.0.0.1:8765"
        );
        assert_eq!(
            bind_addr("localhost:9", false).unwrap().to_string(),
            "127.0.0.1:9"
        );
        let err = bind_addr("0.0.0.0:8765", false).unwrap_err();
        assert_eq!(err.error_type(), "validation_error");
        assert!(bind_addr("0.0.0.0:8765", true).is_ok());
        assert!(bind_addr("nonsense", false).is_err());
    }

    #[test]
    fn a_generated_token_is_private_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        let (token, source) = load_token(&home, None).unwrap();
        assert!(token.len() >= 32);
        let mode = std::fs::metadata(&source).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{source}");
        assert_eq!(load_token(&home, None).unwrap().0, token);
        let file = |name: &str, text: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        let refused = |path: PathBuf| {
            let e = load_token(&home, Some(&path)).unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{path:?}");
        };
        refused(file("short", "abc", 0o600));
        refused(file("shared", "a-long-enough-token-123", 0o644));
        let good = file("good", "a-long-enough-token-123\n", 0o600);
        assert_eq!(
            load_token(&home, Some(&good)).unwrap().0,
            "a-long-enough-token-123"
        );
    }
}
