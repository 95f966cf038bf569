//! One JMAP session (RFC 8620): the session resource found from a URL, and method calls
//! sent to its API URL, each request of several calls answered in one round trip.

use mailbroker_core::{Error, Result};
use serde::Deserialize;
use serde_json::Value;

use crate::wire::{Answer, Call, Response, ResultReference, Session, USING};

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
    /// The session's `uploadUrl` (RFC 8620 §6.1), absolute, its template unexpanded.
    upload: Option<String>,
    sent: u64,
}

/// What a session trusts beyond the public roots and its own origin: a CA (PEM) for a
/// server with a private one, and other https origins the person allowed the session's URLs
/// to name (`--trust-origin`), to which its credentials may then go too.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pub ca_file: Option<String>,
    pub origins: Vec<String>,
}

/// The HTTP client: a timeout, the CA given, and redirects followed only within the
/// origin they start from (so never to another host, nor from https down to http, where
/// they would take the credentials).
fn http_client(ca_file: Option<&str>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same = attempt
                .previous()
                .first()
                .is_some_and(|first| mailbroker_core::endpoint::same_origin(first, attempt.url()));
            match same && attempt.previous().len() < 5 {
                true => attempt.follow(),
                false => attempt.stop(),
            }
        }));
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            Error::validation(format!("cannot read the CA file {path}: {e}"))
                .with_next_step("pass a PEM file with --ca-file")
        })?;
        // A file with no certificate in it would be taken as trusting nothing more, and the
        // failure would come later as a refused certificate.
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default();
        if certificates.is_empty() {
            return Err(
                Error::validation(format!("{path} holds no PEM certificate")).with_next_step(
                    "pass the server's CA certificate (BEGIN CERTIFICATE) with --ca-file",
                ),
            );
        }
        for ca in certificates {
            builder = builder.add_root_certificate(ca);
        }
    }
    builder
        .build()
        .map_err(|e| Error::internal(format!("jmap http client: {e}")))
}

/// A URL the session names, made absolute against `session` and kept as written (a
/// template's `{accountId}` stays as it is), that credentials may go to: on the session's
/// own origin, or on an https origin the person trusted.
fn named_url(
    session: &url::Url,
    reference: &str,
    what: &str,
    trusted: &[String],
) -> Result<String> {
    let what = format!("the JMAP session's {what}");
    let absolute = match reference.contains("://") {
        true => reference.to_string(),
        false => format!(
            "{}/{}",
            session.origin().ascii_serialization(),
            reference.trim_start_matches('/')
        ),
    };
    // Checked with the template's braces out of the way; what is checked is its origin.
    let url = mailbroker_core::endpoint::credential_url(&what, &absolute.replace(['{', '}'], ""))?;
    let origin = url.origin().ascii_serialization();
    let allowed = mailbroker_core::endpoint::same_origin(session, &url)
        || (url.scheme() == "https" && trusted.iter().any(|t| t.trim_end_matches('/') == origin));
    if !allowed {
        return Err(Error::validation(format!(
            "{what} is on {origin}, another origin than the session's ({}): the account's \
             credentials go only to the session's origin",
            session.origin().ascii_serialization()
        ))
        .with_next_step(format!(
            "if {origin} is the server's own, add the account with --trust-origin {origin}"
        )));
    }
    Ok(absolute)
}

impl Client {
    /// Opens the session at `url`: the session resource itself, or a server whose
    /// `/.well-known/jmap` leads to it. Every URL the session names must be one its
    /// credentials may go to (`named_url`).
    pub async fn connect(url: &str, auth: Auth, trust: &Trust) -> Result<Client> {
        let http = http_client(trust.ca_file.as_deref())?;
        let base = url.trim_end_matches('/');
        let session_url_text = match base.contains("/jmap") || base.contains("/.well-known/") {
            true => base.to_string(),
            false => format!("{base}/.well-known/jmap"),
        };
        let session_url =
            mailbroker_core::endpoint::credential_url("the JMAP URL", &session_url_text)?;
        let request = authorized(http.get(session_url.as_str()), &auth);
        let response = answer(request.send().await, "jmap session")?;
        // A redirect within the origin was followed; the session's URLs are relative to
        // where it ended.
        let session_url = response.url().clone();
        let session: Session = response
            .json()
            .await
            .map_err(|e| Error::provider_unavailable(format!("jmap session: {e}")))?;
        let account_id = session
            .mail_account()
            .ok_or_else(|| {
                Error::unsupported("this JMAP session offers no mail account").with_next_step(
                    "check the URL and the user: the server must serve JMAP Mail (RFC 8621)",
                )
            })?
            .to_string();
        // Every URL the session names carries credentials (RFC 8620 §2): each is checked,
        // the upload URL too.
        let named = |reference: &Option<String>, what: &str| {
            let named = reference.as_deref();
            named
                .map(|r| named_url(&session_url, r, what, &trust.origins))
                .transpose()
        };
        let api_url = named(&session.api_url, "its API URL")?;
        let download = named(&session.download_url, "its download URL")?;
        let upload = named(&session.upload_url, "its upload URL")?;
        let event_source = named(&session.event_source_url, "its event source URL")?;
        let api_url = match api_url {
            Some(api) => api,
            None => named_url(&session_url, "/jmap/", "API URL", &trust.origins)?,
        };
        let core = session.core_limits();
        let limit =
            |n: Option<u64>, default: usize| n.map_or(default, |n| n.clamp(1, 100_000) as usize);
        let limits = Limits {
            max_objects_in_get: limit(core.max_objects_in_get, 500),
            max_objects_in_set: limit(core.max_objects_in_set, 500),
            max_calls_in_request: limit(core.max_calls_in_request, 16),
        };
        Ok(Client {
            http,
            auth,
            api_url,
            account_id,
            limits,
            event_source,
            download,
            upload,
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

    /// Sends `calls` (the account id is added to each); their answers in order. A method
    /// error answers as `"error"` in its place, for the caller to read (`Answer::read`). The
    /// calls go in as few requests as the session's `maxCallsInRequest` allows, in order; a
    /// result reference (`#ids`) to a call answered by an earlier request is resolved here,
    /// since a server sees only the calls of its own request (RFC 8620 §3.7).
    pub async fn call(&mut self, calls: Vec<Call>) -> Result<Vec<Answer>> {
        let max = self.limits.max_calls_in_request.max(1);
        let mut answered: Vec<Answer> = Vec::with_capacity(calls.len());
        let mut calls = calls.into_iter().enumerate().peekable();
        while calls.peek().is_some() {
            let first = answered.len();
            let mut method_calls = Vec::with_capacity(max);
            for (n, call) in calls.by_ref().take(max) {
                let mut args = call.arguments()?;
                resolve_references(&mut args, &answered[..first])?;
                if let Value::Object(fields) = &mut args {
                    fields.insert("accountId".into(), self.account_id.clone().into());
                }
                method_calls.push((call.name(), args, n.to_string()));
            }
            let body = Request {
                using: &USING,
                method_calls,
            };
            self.sent += 1;
            let request = authorized(self.http.post(&self.api_url), &self.auth).json(&body);
            let response: Response = answer(request.send().await, "jmap request")?
                .json()
                .await
                .map_err(|e| Error::provider_unavailable(format!("jmap answer: {e}")))?;
            answered.extend(response.method_responses);
        }
        Ok(answered)
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

    /// Uploads `bytes` (a message, `message/rfc822`) to the upload URL; its blob id.
    pub async fn upload(&mut self, bytes: Vec<u8>) -> Result<String> {
        let Some(template) = &self.upload else {
            return Err(Error::unsupported(
                "this JMAP session has no upload URL, so nothing can be saved",
            ));
        };
        let url = template.replace("{accountId}", &encode(&self.account_id));
        self.sent += 1;
        let request = authorized(self.http.post(&url), &self.auth)
            .header(reqwest::header::CONTENT_TYPE, "message/rfc822")
            .body(bytes);
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Uploaded {
            blob_id: String,
        }
        let uploaded: Uploaded = answer(request.send().await, "jmap upload")?
            .json()
            .await
            .map_err(|e| Error::provider_unavailable(format!("jmap upload: {e}")))?;
        Ok(uploaded.blob_id)
    }

    /// Requests sent on this session (the session resource included).
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// A request (RFC 8620 §3.3): its method calls as Invocations (name, arguments, call id).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    using: &'a [&'a str],
    method_calls: Vec<(&'static str, Value, String)>,
}

/// Replaces each result reference in `args` (`"#ids": {resultOf, name, path}`) to a call
/// among `answered` (by its number) with the value its path points at there; references to
/// calls of the same request are left to the server.
fn resolve_references(args: &mut Value, answered: &[Answer]) -> Result<()> {
    let Value::Object(fields) = args else {
        return Ok(());
    };
    let references: Vec<String> = fields
        .keys()
        .filter(|k| k.starts_with('#'))
        .cloned()
        .collect();
    for key in references {
        let reference = ResultReference::deserialize(&fields[&key]).map_err(|e| {
            Error::internal(format!(
                "jmap: a result reference not as RFC 8620 has it: {e}"
            ))
        })?;
        let Some(at) = reference
            .result_of
            .parse::<usize>()
            .ok()
            .filter(|n| *n < answered.len())
        else {
            continue;
        };
        let Answer(name, result, _) = &answered[at];
        if reference.name != *name {
            return Err(Error::provider_unavailable(format!(
                "jmap: call {at} answered {name}, not the {} a later call refers to",
                reference.name
            )));
        }
        let path = reference.path.as_str();
        let value = pointer(result, path);
        fields.remove(&key);
        fields.insert(key[1..].to_string(), value);
    }
    Ok(())
}

/// The value at a result reference's `path` (a JSON pointer whose `*` maps over an array,
/// flattening arrays it yields: RFC 8620 §3.7).
fn pointer(value: &Value, path: &str) -> Value {
    let Some(rest) = path.strip_prefix('/') else {
        return value.clone();
    };
    let (token, rest) = rest.split_once('/').map_or((rest, ""), |(t, r)| (t, r));
    let rest = if rest.is_empty() {
        String::new()
    } else {
        format!("/{rest}")
    };
    let token = token.replace("~1", "/").replace("~0", "~");
    match (token.as_str(), value) {
        ("*", Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match pointer(item, &rest) {
                    Value::Array(inner) => out.extend(inner),
                    other => out.push(other),
                }
            }
            Value::Array(out)
        }
        (_, Value::Object(map)) => map.get(&token).map_or(Value::Null, |v| pointer(v, &rest)),
        (_, Value::Array(items)) => token
            .parse::<usize>()
            .ok()
            .and_then(|i| items.get(i))
            .map_or(Value::Null, |v| pointer(v, &rest)),
        _ => Value::Null,
    }
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
        // reqwest says only "error sending request"; the reason is further down the chain.
        let mut reasons = Vec::new();
        let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&e);
        while let Some(c) = cause {
            reasons.push(c.to_string());
            cause = c.source();
        }
        let connect = e.is_connect();
        let reason = reasons
            .last()
            .cloned()
            .unwrap_or_else(|| e.without_url().to_string());
        if reasons.iter().any(|r| r.contains("certificate")) {
            return Error::provider_unavailable(format!(
                "{what}: the server's TLS certificate is not trusted ({reason})"
            ))
            .with_next_step(
                "for a server with a private CA, pass its CA certificate with --ca-file PEM",
            );
        }
        let refused = Error::provider_unavailable(format!("{what}: {reason}"));
        match connect {
            true => refused.with_next_step("check the URL and that the server runs, then retry"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reference_to_an_earlier_request_is_resolved_here() {
        let answered = vec![Answer(
            "Email/query".to_string(),
            json!({ "ids": ["a", "b"], "list": [{ "id": "x", "ids": [1, 2] }, { "id": "y", "ids": [3] }] }),
            "0".to_string(),
        )];
        let mut args = json!({
            "#ids": { "resultOf": "0", "name": "Email/query", "path": "/ids" },
            "properties": ["id"],
        });
        resolve_references(&mut args, &answered).unwrap();
        assert_eq!(args, json!({ "ids": ["a", "b"], "properties": ["id"] }));
        assert_eq!(pointer(&answered[0].1, "/list/*/id"), json!(["x", "y"]));
        assert_eq!(pointer(&answered[0].1, "/list/*/ids"), json!([1, 2, 3]));
        // A reference within the request is the server's.
        let mut same =
            json!({ "#ids": { "resultOf": "1", "name": "Email/query", "path": "/ids" } });
        resolve_references(&mut same, &answered).unwrap();
        assert!(same.get("#ids").is_some());
        let mut wrong = json!({ "#ids": { "resultOf": "0", "name": "Email/get", "path": "/ids" } });
        assert!(resolve_references(&mut wrong, &answered).is_err());
    }
}
