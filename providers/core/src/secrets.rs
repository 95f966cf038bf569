//! Keeping secrets out of log lines, whichever crate writes them.
//!
//! Passwords and tokens pass through dependencies that log at trace level (async-imap logs
//! every command it sends, LOGIN included). The logger therefore passes each line through
//! `redact`, which removes every secret this process has been given (`register`: the store
//! registers each secret it reads or writes) and, as a net for what was never registered,
//! the values of the shapes secrets travel in: an IMAP LOGIN's arguments, a bearer token,
//! OAuth fields.

use std::borrow::Cow;
use std::sync::RwLock;

/// What replaces a secret in a log line.
pub const REDACTED: &str = "<redacted>";

/// Shorter values are not registered: replacing every occurrence of a two-letter string
/// would garble every line without protecting much.
const MIN_LEN: usize = 4;

static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers `secret` (and the escaped forms a log line may show it in) for `redact`.
pub fn register(secret: &str) {
    if secret.chars().count() < MIN_LEN {
        return;
    }
    let debug = format!("{secret:?}");
    let escaped = debug[1..debug.len() - 1].to_string();
    let Ok(mut known) = KNOWN.write() else {
        return;
    };
    for form in [secret.to_string(), escaped] {
        if !known.contains(&form) {
            known.push(form);
        }
    }
    // Longest first, so a secret that contains another is removed whole.
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `line` without any registered secret or any value in a secret-carrying shape.
pub fn redact(line: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(line);
    if let Ok(known) = KNOWN.read() {
        for secret in known.iter() {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
    }
    for (marker, ends) in SHAPES {
        if out.contains(marker) {
            out = Cow::Owned(redact_after(&out, marker, ends));
        }
    }
    out
}

/// A marker after which a secret follows, and the characters that end it.
const SHAPES: [(&str, &[char]); 7] = [
    // An IMAP LOGIN's user name and password, to the end of the command.
    ("LOGIN ", &['\n', '\r']),
    ("Bearer ", &['"', '\'', ' ', ',', '\n', '\\']),
    ("access_token", &['"', '&', ',', ' ', '\n', '\\']),
    ("refresh_token", &['"', '&', ',', ' ', '\n', '\\']),
    ("client_secret", &['"', '&', ',', ' ', '\n', '\\']),
    ("code_verifier", &['"', '&', ',', ' ', '\n', '\\']),
    ("password", &['"', '&', ',', ' ', '\n', '\\']),
];

/// `text` with what follows each `marker` (after any `":` or `=` separating a field name
/// from its value) up to one of `ends`, replaced by `REDACTED`.
fn redact_after(text: &str, marker: &str, ends: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        let (before, after) = rest.split_at(at + marker.len());
        out.push_str(before);
        let value_at = after
            .find(|c: char| !matches!(c, '"' | ':' | '=' | ' ' | '\\'))
            .unwrap_or(after.len());
        let separator = &after[..value_at];
        // A field name alone ("password" in a sentence) is not followed by a separator.
        if marker != "LOGIN " && marker != "Bearer " && separator.trim().is_empty() {
            rest = after;
            continue;
        }
        out.push_str(separator);
        let value = &after[value_at..];
        let end = value.find(ends).unwrap_or(value.len());
        if end > 0 {
            out.push_str(REDACTED);
        }
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_removed_in_every_form() {
        register("pa\"ss\\word-1");
        let line = r#"encode: input: Some("A1"), Ok("SELECT x") pa\"ss\\word-1 and pa"ss\word-1"#;
        let clean = redact(line);
        assert!(!clean.contains("word-1"), "{clean}");
    }

    #[test]
    fn secret_shapes_are_removed_even_unregistered() {
        let cases = [
            (
                r#"encode: input: Some("A0001"), Ok("LOGIN \"me\" \"hunter2\"")"#,
                "hunter2",
            ),
            ("authorization: Bearer ya29.secret-token", "ya29"),
            (r#"{"access_token":"tok-123","expires_in":3599}"#, "tok-123"),
            (
                "grant_type=refresh_token&refresh_token=1//rt-456&x=1",
                "rt-456",
            ),
            (r#"client_secret: "cs-789""#, "cs-789"),
        ];
        for (line, secret) in cases {
            let clean = redact(line);
            assert!(!clean.contains(secret), "{line} -> {clean}");
            assert!(clean.contains(REDACTED), "{clean}");
        }
        // Words alone are left as they are.
        assert_eq!(redact("wrong password for user"), "wrong password for user");
        assert_eq!(
            redact("grant_type=refresh_token&x=1"),
            "grant_type=refresh_token&x=1"
        );
    }
}
