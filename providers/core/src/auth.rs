//! The receiving server's verdicts on a message (`Authentication-Results`, RFC 8601): SPF,
//! DKIM and DMARC, pass, fail or none.
//!
//! Architecture Invariant: only a header the account's own provider added counts: the topmost
//! `Authentication-Results` whose authserv-id is one the account names (`mx.google.com` for
//! Gmail by default; `account set ID --authserv-id` otherwise). The receiving server puts its
//! own above what the message arrived with and removes any that claims its name (RFC 8601
//! §5), so one a sender wrote is either below it or names another server, and is never read.

use serde::{Deserialize, Serialize};

/// One method's result as the server stated it, reduced to what a person acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not checked, nothing to check (`none`), or an answer that is neither pass nor fail
    /// (`neutral`, `softfail`, `temperror`, `permerror`, `policy`).
    None,
}

/// The verdicts of the account's own server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthVerdicts {
    pub spf: Verdict,
    pub dkim: Verdict,
    pub dmarc: Verdict,
}

impl AuthVerdicts {
    /// `pass` when DMARC passed (or, without DMARC, SPF or DKIM did and none failed),
    /// `fail` when any failed, else `none`: what `auth:` means.
    pub fn overall(&self) -> Verdict {
        let all = [self.spf, self.dkim, self.dmarc];
        if all.contains(&Verdict::Fail) {
            return Verdict::Fail;
        }
        match self.dmarc == Verdict::Pass || all.contains(&Verdict::Pass) {
            true => Verdict::Pass,
            false => Verdict::None,
        }
    }
}

/// The authserv-ids a provider is known to stamp, trusted unless the person names others.
pub fn known_authserv_ids(provider: crate::ProviderKind) -> Vec<String> {
    match provider {
        crate::ProviderKind::Gmail => vec!["mx.google.com".to_string()],
        _ => Vec::new(),
    }
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::None => "none",
        }
    }
}

/// The verdicts in the topmost of `headers` (each `Authentication-Results` value, in the
/// order the message has them) whose authserv-id is one of `trusted`; else `None`.
pub fn verdicts(headers: &[&str], trusted: &[String]) -> Option<AuthVerdicts> {
    let authserv_id = |h: &str| -> Option<String> {
        let first = split_unquoted(h, ';').into_iter().next()?;
        Some(
            without_comments(&first)
                .split_whitespace()
                .next()?
                .to_ascii_lowercase(),
        )
    };
    let own = headers.iter().find(|h| {
        authserv_id(h).is_some_and(|id| trusted.iter().any(|t| t.eq_ignore_ascii_case(&id)))
    })?;
    let mut parts = split_unquoted(own, ';').into_iter();
    parts.next();
    let mut found = AuthVerdicts {
        spf: Verdict::None,
        dkim: Verdict::None,
        dmarc: Verdict::None,
    };
    for statement in parts {
        let statement = without_comments(&statement);
        let Some((method, rest)) = statement.trim().split_once('=') else {
            continue;
        };
        let result = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let verdict = match result.as_str() {
            "pass" => Verdict::Pass,
            "fail" => Verdict::Fail,
            _ => Verdict::None,
        };
        // A method named twice (two DKIM signatures) passes if one passes, else keeps a fail.
        let slot = match method.trim().to_ascii_lowercase().as_str() {
            "spf" => &mut found.spf,
            "dkim" => &mut found.dkim,
            "dmarc" => &mut found.dmarc,
            _ => continue,
        };
        if *slot != Verdict::Pass && verdict != Verdict::None {
            *slot = verdict;
        }
    }
    Some(found)
}

/// `text` split on `sep` outside double quotes and comments.
fn split_unquoted(text: &str, sep: char) -> Vec<String> {
    let (mut out, mut current) = (Vec::new(), String::new());
    let (mut quoted, mut depth) = (false, 0u32);
    for c in text.chars() {
        match c {
            '"' if depth == 0 => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            c if c == sep && !quoted && depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out
}

/// `text` without its (comments), which may hold anything, `dkim=pass` too.
fn without_comments(text: &str) -> String {
    let (mut out, mut depth, mut quoted) = (String::new(), 0u32, false);
    for c in text.chars() {
        match c {
            '"' if depth == 0 => quoted = !quoted,
            '(' if !quoted => {
                depth += 1;
                continue;
            }
            ')' if !quoted && depth > 0 => {
                depth -= 1;
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOGLE: &str = "mx.google.com;\r\n       dkim=pass header.i=@example.org header.s=s1;\r\n       spf=pass (google.com: domain of a@example.org designates 1.2.3.4 as permitted sender) smtp.mailfrom=a@example.org;\r\n       dmarc=pass (p=REJECT sp=REJECT dis=NONE) header.from=example.org";

    #[test]
    fn the_topmost_header_of_a_trusted_server_is_read() {
        let trusted = vec!["mx.google.com".to_string()];
        let v = verdicts(&[GOOGLE], &trusted).unwrap();
        assert_eq!(
            (v.spf, v.dkim, v.dmarc),
            (Verdict::Pass, Verdict::Pass, Verdict::Pass)
        );
        assert_eq!(v.overall(), Verdict::Pass);
        let failed = "mx.google.com; spf=softfail smtp.mailfrom=x; dmarc=fail (p=NONE) header.from=bank.example";
        let v = verdicts(&[failed, GOOGLE], &trusted).unwrap();
        assert_eq!(
            (v.spf, v.dmarc, v.overall()),
            (Verdict::None, Verdict::Fail, Verdict::Fail)
        );
    }

    #[test]
    fn a_header_a_sender_added_is_never_read() {
        let trusted = vec!["mx.example.test".to_string()];
        let forged = "mx.example.test; dkim=pass; spf=pass; dmarc=pass";
        let own = "mx.example.test; dmarc=fail header.from=bank.example";
        // The sender's sits below the server's own: the server's is the one read.
        assert_eq!(
            verdicts(&[own, forged], &trusted).unwrap().overall(),
            Verdict::Fail
        );
        // A header naming another server says nothing, above the server's own or alone.
        let other = "relay.evil.example; dmarc=pass";
        assert_eq!(
            verdicts(&[other, own], &trusted).unwrap().overall(),
            Verdict::Fail
        );
        assert_eq!(verdicts(&[other], &trusted), None);
        assert_eq!(verdicts(&[], &trusted), None);
        assert_eq!(verdicts(&[forged], &[]), None);
        // A comment cannot smuggle a verdict in.
        let comment = "mx.example.test; dkim=none (dkim=pass; spf=pass)";
        assert_eq!(
            verdicts(&[comment], &trusted).unwrap().overall(),
            Verdict::None
        );
    }
}
