//! A JMAP session resource alone, for tests of where credentials may go: it answers every
//! request with what the test set (a session naming URLs, or a redirect), over plain HTTP or
//! TLS, on any loopback address (`127.0.0.2` standing for another host), and records each
//! request it got and whether it carried credentials.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use mailbroker_mock_server::{Bound, Served};
use serde_json::Value;

/// What the server answers every request with.
#[derive(Clone)]
pub enum Reply {
    /// A session object naming this mail account and these URLs.
    Session(Value),
    /// A redirect to this URL.
    Redirect(String),
    /// 404, as a host that serves nothing.
    Nothing,
}

/// One request the server got: `METHOD /path`, and whether it carried credentials.
#[derive(Debug, Clone)]
pub struct Got {
    pub request: String,
    pub credentials: bool,
}

#[derive(Clone)]
struct Shared {
    reply: Reply,
    got: Arc<Mutex<Vec<Got>>>,
}

pub struct SessionServer {
    pub url: String,
    got: Arc<Mutex<Vec<Got>>>,
    _served: Served,
}

impl SessionServer {
    /// Serves `reply` on a free port of loopback address `ip` over plain HTTP, until dropped.
    pub async fn http(ip: [u8; 4], reply: Reply) -> std::io::Result<SessionServer> {
        Ok(SessionServer::start(
            mailbroker_mock_server::bind_on(ip).await?,
            reply,
        ))
    }

    /// Serves `reply` on 127.0.0.1 over TLS with `ca`'s server certificate, until dropped.
    pub async fn https(ca: &crate::TestCa, reply: Reply) -> std::io::Result<SessionServer> {
        let bound = mailbroker_mock_server::bind_tls(&ca.cert_pem, &ca.key_pem).await?;
        Ok(SessionServer::start(bound, reply))
    }

    /// Serves `reply` on `bound` until dropped.
    pub fn start(bound: Bound, reply: Reply) -> SessionServer {
        let got = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            reply,
            got: got.clone(),
        };
        let app = axum::Router::new().fallback(answer).with_state(shared);
        let served = bound.serve(app);
        SessionServer {
            url: served.url.clone(),
            got,
            _served: served,
        }
    }

    /// Every request so far.
    pub fn got(&self) -> Vec<Got> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

/// A minimal session (RFC 8620 §2) for user `me`, its URLs as given.
pub fn session(api_url: &str, download_url: Option<&str>) -> Value {
    let mut s = serde_json::json!({
        "capabilities": { "urn:ietf:params:jmap:core": {}, "urn:ietf:params:jmap:mail": {} },
        "accounts": { "me": { "name": "me", "isPersonal": true, "accountCapabilities": {} } },
        "primaryAccounts": { "urn:ietf:params:jmap:mail": "me" },
        "username": "me",
        "apiUrl": api_url,
        "state": "0",
    });
    if let Some(download) = download_url {
        s["downloadUrl"] = download.into();
    }
    s
}

async fn answer(State(shared): State<Shared>, request: Request) -> Response {
    let credentials = request.headers().contains_key(header::AUTHORIZATION);
    let got = Got {
        request: format!("{} {}", request.method(), request.uri().path()),
        credentials,
    };
    if let Ok(mut all) = shared.got.lock() {
        all.push(got);
    }
    match shared.reply {
        Reply::Session(body) => (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Reply::Redirect(to) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
        Reply::Nothing => StatusCode::NOT_FOUND.into_response(),
    }
}
