//! One JMAP session (RFC 8620): the session resource found from a URL, and method calls
//! sent to its API URL, each request of several calls answered in one round trip.

use mailbroker_core::{Error, Result};
use serde_json::{Value, json};

/// How requests are authenticated: Basic with a password (Cyrus, Stalwart), Bearer with a
/// token (Fastmail's API tokens).
#[derive(Clone)]
pub enum Auth {
    Basic { username: String, password: String },
    Bearer(String),
}

/// The core limits a server announces (RFC 8620 §2), which batches must keep within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_objects_in_get: usize,
    pub max_objects_in_set: usize,
    pub max_calls_in_request: usize,
}

/// The capabilities every request names.
const USING: [&str; 2] = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"];

pub struct Client {
    http: reqwest::Client,
    auth: Auth,
    api_url: String,
    /// The account holding the mail (the session's primary mail account).
    pub account_id: String,
    pub limits: Limits,
    /// The session's `eventSourceUrl` (RFC 8620 §7.3), absolute, its template unexpanded.
    pub event_source: Option<String>,
    /// The session's `downloadUrl` (RFC 8620 §6.2), absolute, its template unexpanded.
    download: Option<String>,
    sent: u64,
}

impl Client {
    /// Opens the session at `url`: the session resource itself, or a server whose
    /// `/.well-known/jmap` leads to it; `ca_file` is a CA (PEM) trusted beside the public
    /// roots.
    pub async fn connect(url: &str, auth: Auth, ca_file: Option<&str>) -> Result<Client> {
        let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(120));
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                Error::validation(format!("cannot read the CA file {path}: {e}"))
                    .with_next_step("pass a PEM file with --ca-file")
            })?;
            let ca = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Error::validation(format!("{path} is not a PEM certificate: {e}"))
                    .with_next_step("pass a PEM file with --ca-file")
            })?;
            builder = builder.add_root_certificate(ca);
        }
        let http = builder
            .build()
            .map_err(|e| Error::internal(format!("jmap http client: {e}")))?;
        let base = url.trim_end_matches('/');
        let session_url = match base.contains("/jmap") || base.contains("/.well-known/") {
            true => base.to_string(),
            false => format!("{base}/.well-known/jmap"),
        };
        let request = authorized(http.get(&session_url), &auth);
        let session: Value = answer(request.send().await, "jmap session")?
            .json()
            .await
            .map_err(|e| Error::provider_unavailable(format!("jmap session: {e}")))?;
        let account_id = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
            .as_str()
            .ok_or_else(|| {
                Error::unsupported("this JMAP session offers no mail account").with_next_step(
                    "check the URL and the user: the server must serve JMAP Mail (RFC 8621)",
                )
            })?
            .to_string();
        let api_url = absolute(&session_url, session["apiUrl"].as_str().unwrap_or("/jmap/"));
        let core = &session["capabilities"]["urn:ietf:params:jmap:core"];
        let limit = |key: &str, default: usize| {
            core[key]
                .as_u64()
                .map_or(default, |n| n.clamp(1, 100_000) as usize)
        };
        let limits = Limits {
            max_objects_in_get: limit("maxObjectsInGet", 500),
            max_objects_in_set: limit("maxObjectsInSet", 500),
            max_calls_in_request: limit("maxCallsInRequest", 16),
        };
        let event_source = session["eventSourceUrl"]
            .as_str()
            .map(|url| absolute(&session_url, url));
        let download = session["downloadUrl"]
            .as_str()
            .map(|url| absolute(&session_url, url));
        Ok(Client {
            http,
            auth,
            api_url,
            account_id,
            limits,
            event_source,
            download,
            sent: 1,
        })
    }

    /// Opens the server's event stream at `url`; `None` when it answers 204 (No Content),
    /// as a server that does not push does. The request may last up to `timeout`.
    pub async fn events(
        &mut self,
        url: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<reqwest::Response>> {
        self.sent += 1;
        let request = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .timeout(timeout);
        let response = answer(authorized(request, &self.auth).send().await, "jmap events")?;
        Ok((response.status() != reqwest::StatusCode::NO_CONTENT).then_some(response))
    }

    /// Sends `calls` (`[name, arguments, call id]` each; the account id is added to every
    /// call's arguments) in one request; the responses in order. A method error answers as
    /// `["error", {type}, id]` in its place, for the caller to read.
    pub async fn call(&mut self, calls: Vec<(&str, Value)>) -> Result<Vec<(String, Value)>> {
        let method_calls: Vec<Value> = calls
            .into_iter()
            .enumerate()
            .map(|(n, (name, mut args))| {
                args["accountId"] = json!(self.account_id);
                json!([name, args, n.to_string()])
            })
            .collect();
        let body = json!({ "using": USING, "methodCalls": method_calls });
        self.sent += 1;
        let request = authorized(self.http.post(&self.api_url), &self.auth).json(&body);
        let answer: Value = answer(request.send().await, "jmap request")?
            .json()
            .await
            .map_err(|e| Error::provider_unavailable(format!("jmap answer: {e}")))?;
        let responses = answer["methodResponses"].as_array().ok_or_else(|| {
            Error::provider_unavailable(format!("jmap answer without methodResponses: {answer}"))
        })?;
        Ok(responses
            .iter()
            .map(|r| (r[0].as_str().unwrap_or_default().to_string(), r[1].clone()))
            .collect())
    }

    /// The blob `blob_id` (a whole message, as `message/rfc822`) from the download URL.
    pub async fn download(&mut self, blob_id: &str) -> Result<Vec<u8>> {
        let Some(template) = &self.download else {
            return Err(Error::unsupported(
                "this JMAP session has no download URL, so messages cannot be read",
            ));
        };
        // RFC 6570 simple expansion: each value percent-encoded.
        let url = template
            .replace("{accountId}", &encode(&self.account_id))
            .replace("{blobId}", &encode(blob_id))
            .replace("{type}", "message%2Frfc822")
            .replace("{name}", "message.eml");
        self.sent += 1;
        let request = authorized(self.http.get(&url), &self.auth);
        let body = answer(request.send().await, "jmap download")?
            .bytes()
            .await
            .map_err(|e| Error::provider_unavailable(format!("jmap download: {e}")))?;
        Ok(body.to_vec())
    }

    /// Requests sent on this session (the session resource included).
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// One method's answer, or its error as ours (`cannotCalculateChanges` is `not_found`: the
/// state it was asked from is gone, and the caller starts over).
pub fn method(response: &(String, Value), what: &str) -> Result<Value> {
    let (name, args) = response;
    if name != "error" {
        return Ok(args.clone());
    }
    let kind = args["type"].as_str().unwrap_or("unknown");
    let message = format!("jmap {what}: the server answered {kind}");
    Err(match kind {
        "cannotCalculateChanges" => Error::not_found(message),
        "accountNotFound" | "forbidden" | "accountNotSupportedByMethod" => {
            Error::insufficient_scope(message)
        }
        "requestTooLarge" | "tooManyChanges" => Error::limit_exceeded(message),
        _ => Error::provider_unavailable(message),
    })
}

fn authorized(request: reqwest::RequestBuilder, auth: &Auth) -> reqwest::RequestBuilder {
    match auth {
        Auth::Basic { username, password } => request.basic_auth(username, Some(password)),
        Auth::Bearer(token) => request.bearer_auth(token),
    }
}

/// The answer, or the error its status means (no secret is ever in it).
fn answer(
    sent: std::result::Result<reqwest::Response, reqwest::Error>,
    what: &str,
) -> Result<reqwest::Response> {
    let response = sent.map_err(|e| {
        let connect = e.is_connect();
        let refused = Error::provider_unavailable(format!("{what}: {}", e.without_url()));
        // A certificate the roots do not know fails the connection; say what fixes it.
        match connect {
            true => refused.with_next_step(
                "check the URL; for a server with a private CA, pass it with --ca-file PEM",
            ),
            false => refused,
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let message = format!("{what}: the server answered {status}");
    Err(match status.as_u16() {
        401 => Error::auth_required(message)
            .with_next_step("check the user name and password (or token), then try again"),
        403 => Error::insufficient_scope(message),
        429 => Error::rate_limited(message),
        _ => Error::provider_unavailable(message),
    })
}

/// A template value as RFC 6570's simple expansion writes it: unreserved characters as they
/// are, every other byte percent-encoded.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `reference` (the session's `apiUrl`, often a path) made absolute against `session_url`.
fn absolute(session_url: &str, reference: &str) -> String {
    if reference.starts_with("http://") || reference.starts_with("https://") {
        return reference.to_string();
    }
    let origin_end = session_url
        .find("://")
        .and_then(|scheme| session_url[scheme + 3..].find('/').map(|i| scheme + 3 + i))
        .unwrap_or(session_url.len());
    format!("{}{}", &session_url[..origin_end], reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_path_is_made_absolute_against_the_session() {
        assert_eq!(
            absolute("http://127.0.0.1:8080/.well-known/jmap", "/jmap/"),
            "http://127.0.0.1:8080/jmap/"
        );
        assert_eq!(
            absolute(
                "https://api.example.com/jmap/session",
                "https://api.example.com/jmap/api/"
            ),
            "https://api.example.com/jmap/api/"
        );
    }

    #[test]
    fn method_errors_map_to_ours() {
        let error = |kind: &str| method(&("error".into(), json!({ "type": kind })), "x");
        assert!(error("cannotCalculateChanges").unwrap_err().is_not_found());
        assert_eq!(
            error("serverFail").unwrap_err().error_type(),
            "provider_unavailable"
        );
        let ok = method(&("Email/get".into(), json!({ "list": [] })), "x");
        assert_eq!(ok.unwrap(), json!({ "list": [] }));
    }
}
