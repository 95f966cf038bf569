//! Where a credential (a password, a token, an OAuth client secret or code) may be sent:
//! a URL read by a URL parser, never by splitting its text; no user name or password in it;
//! and https, or plain http only to this machine (`localhost` or a loopback address), where
//! nothing crosses a network. Every endpoint a person or a server names goes through here
//! before anything is sent to it.

use crate::{Error, Result};

/// Whether `host` names this machine: `localhost`, or a loopback address literal (in
/// brackets or not). A name is not resolved: what it resolves to can change.
pub fn is_this_machine(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `text` as a URL a credential may go to; `what` names it in the error ("the token URL").
pub fn credential_url(what: &str, text: &str) -> Result<url::Url> {
    let url = url::Url::parse(text.trim()).map_err(|e| {
        Error::validation(format!("{what} {text:?} is not a URL: {e}"))
            .with_next_step("give a full URL, https://host/path")
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::validation(format!(
            "{what} holds a user name or password before its host, which would be sent there"
        ))
        .with_next_step("give the URL without user@; credentials are given separately"));
    }
    let host = url.host_str().unwrap_or_default();
    match url.scheme() {
        "https" if !host.is_empty() => Ok(url),
        "http" if is_this_machine(host) => Ok(url),
        "http" => Err(Error::validation(format!(
            "{what} is plain http to {host}, which would send credentials in clear text"
        ))
        .with_next_step("use https://, or a server on this machine")),
        _ => Err(
            Error::validation(format!("{what} {text:?} is not an http(s) URL"))
                .with_next_step("give an https:// URL"),
        ),
    }
}

/// Whether `url` is on `origin`'s origin: the same scheme, host and port (so never from
/// https down to http).
pub fn same_origin(origin: &url::Url, url: &url::Url) -> bool {
    origin.origin() == url.origin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_count_as_this_machine() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
        ] {
            assert!(is_this_machine(host), "{host}");
        }
        for host in [
            "0.0.0.0",
            "192.0.2.1",
            "imap.example.com",
            "localhost.example.com",
        ] {
            assert!(!is_this_machine(host), "{host}");
        }
    }

    #[test]
    fn credentials_go_over_https_or_to_this_machine_only() {
        for ok in [
            "https://mail.example.org/jmap",
            "http://127.0.0.1:8080/jmap",
            "http://localhost/",
            "http://[::1]:80/x",
            "http://127.0.0.2/",
        ] {
            assert!(credential_url("the URL", ok).is_ok(), "{ok}");
        }
        for bad in [
            // The user name `localhost` and the host 127.0.0.2: split by text, the rule saw
            // "localhost".
            "http://localhost:x@mail.example.org/jmap",
            "https://user:pw@mail.example.org/",
            "http://mail.example.org/jmap",
            "http://localhost.evil.example/",
            "http://127.0.0.1.evil.example/",
            "ftp://127.0.0.1/",
            "mail.example.org",
        ] {
            let e = credential_url("the URL", bad).unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{bad}");
        }
        let session = credential_url("s", "https://a.example/jmap").unwrap();
        let same = credential_url("s", "https://a.example:443/api").unwrap();
        let down = url::Url::parse("http://a.example/api").unwrap();
        let other = credential_url("s", "https://b.example/api").unwrap();
        assert!(same_origin(&session, &same));
        assert!(!same_origin(&session, &down));
        assert!(!same_origin(&session, &other));
    }
}
