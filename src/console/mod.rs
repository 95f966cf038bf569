//! The person's console: server-rendered pages at `/console` where a person looks at what
//! assistants asked for (confirmations waiting), staged deletions with their charts and a
//! sample of their messages, the journal and the accounts' health.
//!
//! Security Invariant: a page is shown only to a browser signed in by a single-use link
//! printed at a terminal (`mailbroker console`, `console link`); the session's cookie is
//! `HttpOnly; SameSite=Strict` (and `Secure` off loopback), and is kept in the index only as
//! a digest. Every request whose Host is not the console's own is refused (DNS rebinding),
//! every post whose Origin is not its own or without the session's CSRF token is refused,
//! and every answer carries a Content-Security-Policy that allows no script and no frame.
//! Every text from mail or from an assistant is escaped by the template (maud), and shown
//! with its control characters as their pictures (`output::one_line`).

pub mod command;

mod chart;
mod decide;
mod grant;
mod pages;
mod passkeys;
mod rules;
mod waiting;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use mailbroker_core::Error;
use serde::Deserialize;

use crate::store::{ConsoleSession, LinkPurpose, Store};

/// How long a signed-in browser stays signed in.
pub const SESSION_SECS: i64 = 8 * 3600;
/// How long a printed sign-in link can be used.
pub const LINK_SECS: i64 = 5 * 60;
const COOKIE: &str = "mailbroker_console";

/// What every answer says of itself: only its own script (WebAuthn's) and style, no frame,
/// no other origin's anything.
const CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; \
                   style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// The console's own origin, as the browser sees it: what Host and Origin must say.
#[derive(Clone, Debug)]
pub struct Origin {
    /// `http://127.0.0.1:8766` or `https://mail.example.org`, without a trailing slash.
    pub url: String,
    /// What `Host` says: the origin's authority.
    host: String,
    /// Whether cookies need TLS (`Secure`): every origin but plain http on loopback.
    secure: bool,
}

impl Origin {
    /// Parses `url` as the console's origin: https anywhere, http only on loopback (browsers
    /// allow WebAuthn there, and a cookie off TLS elsewhere could be read on the way).
    pub fn parse(url: &str) -> mailbroker_core::Result<Origin> {
        let parsed = url::Url::parse(url).map_err(|e| {
            Error::validation(format!("{url:?} is not a URL: {e}")).with_next_step(
                "give the origin the browser uses, such as https://mail.example.org",
            )
        })?;
        let host = parsed
            .host_str()
            .ok_or_else(|| Error::validation(format!("{url:?} names no host")))?;
        let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
        match (parsed.scheme(), loopback) {
            ("https", _) | ("http", true) => {}
            _ => {
                return Err(Error::validation(format!(
                    "{url:?}: the console is served over https, or over http on loopback only"
                ))
                .with_next_step("put a TLS-terminating proxy in front and give its https origin"));
            }
        }
        if parsed.path() != "/" || parsed.query().is_some() {
            return Err(Error::validation(format!(
                "{url:?} is not an origin: give the scheme, host and port only"
            )));
        }
        let authority = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(Origin {
            url: format!("{}://{authority}", parsed.scheme()),
            host: authority,
            secure: parsed.scheme() == "https",
        })
    }

    /// What `Host` says when a browser or client reaches it: its authority.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The single-use sign-in link for `secret`.
    pub fn sign_in_link(&self, secret: &str) -> String {
        format!("{}/console/sign-in?key={secret}", self.url)
    }
}

/// Where a listener shows the console, beside `/mcp`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConsoleAt {
    /// Nowhere (`mcp --http`).
    #[default]
    Off,
    /// At `http://localhost:PORT`, the listener's own port (`serve`).
    Listener,
    /// At this origin, as a TLS-terminating proxy in front shows it (`serve --console-origin`).
    Origin(String),
}

impl ConsoleAt {
    /// The console's origin for a listener on `port`, if it shows one.
    pub fn origin(&self, port: u16) -> mailbroker_core::Result<Option<Origin>> {
        match self {
            ConsoleAt::Off => Ok(None),
            ConsoleAt::Listener => Origin::parse(&format!("http://localhost:{port}")).map(Some),
            ConsoleAt::Origin(url) => Origin::parse(url).map(Some),
        }
    }
}

/// What the console's handlers share.
#[derive(Clone)]
pub struct Console {
    pub home: crate::home::Home,
    pub store: Store,
    pub origin: Origin,
    /// The tasks a change runs on, so a browser that goes away does not stop one half sent.
    pub work: tokio_util::task::TaskTracker,
    /// The staged deletions this console is running: their pages follow them until done.
    pub running: Running,
}

/// Staged deletions a console started and that have not finished.
#[derive(Clone, Default)]
pub struct Running(std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<i64>>>);

impl Running {
    pub fn contains(&self, id: i64) -> bool {
        self.0.lock().is_ok_and(|ids| ids.contains(&id))
    }

    /// Marks `id` running; false when it already is.
    fn start(&self, id: i64) -> bool {
        self.0.lock().is_ok_and(|mut ids| ids.insert(id))
    }

    fn end(&self, id: i64) {
        if let Ok(mut ids) = self.0.lock() {
            ids.remove(&id);
        }
    }
}

/// The console's routes, under `/console`, behind its guard.
pub fn router(console: Console) -> Router {
    let pages = Router::new()
        .route("/console", get(waiting::list))
        .route("/console/waiting/{page}", get(waiting::one))
        .route("/console/deletions", get(pages::deletions))
        .route("/console/deletions/{id}", get(pages::deletion))
        .route("/console/journal", get(pages::journal))
        .route("/console/journal/{id}", get(pages::change))
        .route("/console/accounts", get(pages::accounts))
        .route("/console/rules", get(rules::list))
        .route("/console/grant/{id}", get(grant::page))
        .route("/console/sign-out", post(sign_out))
        .route("/console/act/options", post(passkeys::act_options))
        .route("/console/act", post(passkeys::act))
        .route_layer(axum::middleware::from_fn_with_state(
            console.clone(),
            signed_in,
        ));
    Router::new()
        .merge(pages)
        .route("/console/sign-in", get(sign_in))
        .route("/console/sign-in/options", post(passkeys::sign_in_options))
        .route("/console/sign-in/passkey", post(passkeys::sign_in_finish))
        .route("/console/enroll", get(passkeys::enroll_page))
        .route("/console/enroll/options", post(passkeys::enroll_options))
        .route("/console/enroll/finish", post(passkeys::enroll_finish))
        .route("/console/style.css", get(style))
        .route("/console/passkey.js", get(script))
        .layer(axum::middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

/// Refuses a request for another host or a post from another origin, and sets the headers
/// every answer carries.
async fn guard(State(console): State<Console>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if host != Some(console.origin.host.as_str()) {
        return refused(
            StatusCode::MISDIRECTED_REQUEST,
            "this is not the console's host",
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
        if origin != Some(console.origin.url.as_str()) {
            return refused(
                StatusCode::FORBIDDEN,
                "a form from another site was refused",
            );
        }
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A signed-in browser's session, for the handlers behind `signed_in`.
#[derive(Clone)]
pub struct Signed {
    pub session: ConsoleSession,
    secret: String,
}

/// Lets through only a browser with a live session (its record goes to the handler).
async fn signed_in(State(console): State<Console>, mut request: Request, next: Next) -> Response {
    let Some(secret) = cookie(request.headers()) else {
        return pages::signed_out(StatusCode::UNAUTHORIZED);
    };
    match console.store.console_session(&secret).await {
        Ok(Some(session)) => {
            request.extensions_mut().insert(Signed { session, secret });
            next.run(request).await
        }
        Ok(None) => pages::signed_out(StatusCode::UNAUTHORIZED),
        Err(e) => pages::failure(&e),
    }
}

/// The session secret the browser sent, if any.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

#[derive(Deserialize)]
struct SignIn {
    key: String,
}

/// Uses a printed link once and signs the browser in.
async fn sign_in(State(console): State<Console>, Query(link): Query<SignIn>) -> Response {
    let store = &console.store;
    if let Err(e) = store
        .redeem_console_link(&link.key, LinkPurpose::SignIn)
        .await
    {
        return pages::failure(&e);
    }
    let secret = match store.open_console_session(SESSION_SECS).await {
        Ok((secret, _)) => secret,
        Err(e) => return pages::failure(&e),
    };
    let mut response = Redirect::to("/console").into_response();
    match session_cookie(&console.origin, &secret) {
        Ok(value) => {
            response.headers_mut().insert(header::SET_COOKIE, value);
            response
        }
        Err(e) => pages::failure(&e),
    }
}

/// The cookie that holds a session's secret: for the console's paths only, out of its
/// scripts' reach, never sent by another site's page, over TLS wherever there is TLS.
fn session_cookie(origin: &Origin, secret: &str) -> mailbroker_core::Result<HeaderValue> {
    let secure = if origin.secure { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={secret}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{secure}"
    );
    HeaderValue::from_str(&cookie).map_err(|e| Error::internal(format!("cookie: {e}")))
}

#[derive(Deserialize)]
struct Form {
    csrf: String,
}

/// Ends the session (a form with its CSRF token).
async fn sign_out(
    State(console): State<Console>,
    axum::Extension(signed): axum::Extension<Signed>,
    axum::Form(form): axum::Form<Form>,
) -> Response {
    if !same(&form.csrf, &signed.session.csrf) {
        return refused(StatusCode::FORBIDDEN, "this form is not from this session");
    }
    if let Err(e) = console.store.close_console_session(&signed.secret).await {
        return pages::failure(&e);
    }
    let mut response = pages::signed_out(StatusCode::OK);
    let gone = format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&gone) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Whether a form's token is the session's, compared in constant time.
pub(super) fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn refused(status: StatusCode, why: &str) -> Response {
    (status, format!("{why}\n")).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("passkey.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_https_or_loopback_http_and_nothing_more() {
        let o = Origin::parse("http://127.0.0.1:8766").unwrap();
        assert_eq!(
            (o.url.as_str(), o.host.as_str(), o.secure),
            ("http://127.0.0.1:8766", "127.0.0.1:8766", false)
        );
        let o = Origin::parse("https://mail.example.org/").unwrap();
        assert_eq!(
            (o.url.as_str(), o.host.as_str(), o.secure),
            ("https://mail.example.org", "mail.example.org", true)
        );
        for bad in [
            "http://mail.example.org",
            "https://x.org/console",
            "ftp://localhost",
            "nonsense",
        ] {
            assert_eq!(
                Origin::parse(bad).unwrap_err().error_type(),
                "validation_error",
                "{bad}"
            );
        }
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; mailbroker_console=abc; b=2"),
        );
        assert_eq!(cookie(&h).as_deref(), Some("abc"));
        assert_eq!(cookie(&HeaderMap::new()), None);
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
