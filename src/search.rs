//! The query DSL of SPEC §7, parsed into terms. Turning terms into SQL is the store's job.
//!
//! Supported now: `from:` `to:` `cc:` `subject:` `tag:`/`label:` `in:`/`mailbox:` `account:`
//! `is:unread|read|flagged|starred|unflagged` `has:attachment` `before:`/`after:` (YYYY-MM-DD)
//! `older_than:`/`newer_than:` (`7d` `2w` `3m` `1y`) `larger:`/`smaller:` (`5M` `200K`),
//! `"quoted phrases"`, bare words (full text), and `-term` negation. Terms AND together.
//! `OR`, `|` and parentheses are refused with a clear error until they are built.

use mailbroker_core::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    From(String),
    To(String),
    Cc(String),
    Subject(String),
    Tag(String),
    Mailbox(String),
    Account(String),
    /// Full-text words or a phrase, matched against subject, addresses, snippet and body.
    Text(String),
    Read(bool),
    Flagged(bool),
    HasAttachment,
    /// Seconds since the epoch: the message date is before / on-or-after this instant.
    Before(i64),
    After(i64),
    Larger(u64),
    Smaller(u64),
    Not(Box<Term>),
}

/// A parsed query: its terms, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub terms: Vec<Term>,
}

fn tokens(input: &str) -> Result<Vec<(usize, String)>, Error> {
    let mut out = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut token = String::new();
        let mut quoted = false;
        while let Some(&(_, c)) = chars.peek() {
            if c == '"' {
                quoted = !quoted;
                token.push(c);
            } else if c.is_whitespace() && !quoted {
                break;
            } else {
                token.push(c);
            }
            chars.next();
        }
        if quoted {
            return Err(Error::validation(format!(
                "unclosed quote in query at position {}: {token}",
                start + 1
            )));
        }
        out.push((start, token));
    }
    Ok(out)
}

fn unquote(s: &str) -> String {
    s.trim_matches('"').to_string()
}

fn parse_date(token: &str, value: &str) -> Result<i64, Error> {
    let parts: Vec<&str> = value.split('-').collect();
    let nums: Option<Vec<i64>> = parts.iter().map(|p| p.parse().ok()).collect();
    match nums.as_deref() {
        Some([y, m, d]) if (1..=12).contains(m) && (1..=31).contains(d) => {
            Ok(days_from_civil(*y, *m, *d) * 86_400)
        }
        _ => Err(Error::validation(format!(
            "{token}: expected a date as YYYY-MM-DD"
        ))),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_age(token: &str, value: &str) -> Result<i64, Error> {
    let (num, unit) = value.split_at(value.len().saturating_sub(1));
    let n: i64 = num.parse().map_err(|_| {
        Error::validation(format!(
            "{token}: expected a number and a unit, like 7d, 2w, 3m, 1y"
        ))
    })?;
    let days = match unit {
        "d" => n,
        "w" => n * 7,
        "m" => n * 30,
        "y" => n * 365,
        _ => {
            return Err(Error::validation(format!(
                "{token}: the unit must be d, w, m or y"
            )));
        }
    };
    Ok(days * 86_400)
}

fn parse_size(token: &str, value: &str) -> Result<u64, Error> {
    let upper = value.to_ascii_uppercase();
    let (num, mult) = match upper.chars().last() {
        Some('K') => (&upper[..upper.len() - 1], 1024),
        Some('M') => (&upper[..upper.len() - 1], 1024 * 1024),
        Some('G') => (&upper[..upper.len() - 1], 1024 * 1024 * 1024),
        _ => (upper.as_str(), 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| Error::validation(format!("{token}: expected a size like 200K or 5M")))
}

fn term_of(token: &str, now: i64) -> Result<Term, Error> {
    if let Some(rest) = token.strip_prefix('-')
        && !rest.is_empty()
    {
        return Ok(Term::Not(Box::new(term_of(rest, now)?)));
    }
    if token == "OR" || token == "|" || token.starts_with('(') || token.ends_with(')') {
        return Err(Error::unsupported(format!(
            "{token:?}: OR and parentheses are not supported yet; terms always AND together"
        ))
        .with_next_step("run one search per alternative"));
    }
    let Some((key, value)) = token.split_once(':').filter(|(k, _)| !k.starts_with('"')) else {
        return Ok(Term::Text(unquote(token)));
    };
    let value = unquote(value);
    if value.is_empty() {
        return Err(Error::validation(format!(
            "{token:?} needs a value after the colon"
        )));
    }
    let term = match key.to_ascii_lowercase().as_str() {
        "from" => Term::From(value),
        "to" => Term::To(value),
        "cc" => Term::Cc(value),
        "subject" => Term::Subject(value),
        "tag" | "label" => Term::Tag(value),
        "in" | "mailbox" => Term::Mailbox(value),
        "account" => Term::Account(value),
        "is" => match value.to_ascii_lowercase().as_str() {
            "unread" => Term::Read(false),
            "read" => Term::Read(true),
            "flagged" | "starred" => Term::Flagged(true),
            "unflagged" | "unstarred" => Term::Flagged(false),
            _ => {
                return Err(Error::validation(format!(
                    "{token:?}: is: takes unread, read, flagged, starred or unflagged"
                )));
            }
        },
        "has" if value.eq_ignore_ascii_case("attachment") => Term::HasAttachment,
        "has" => {
            return Err(Error::validation(format!(
                "{token:?}: has: takes attachment"
            )));
        }
        "before" => Term::Before(parse_date(token, &value)?),
        "after" => Term::After(parse_date(token, &value)?),
        "older_than" => Term::Before(now - parse_age(token, &value)?),
        "newer_than" => Term::After(now - parse_age(token, &value)?),
        "larger" => Term::Larger(parse_size(token, &value)?),
        "smaller" => Term::Smaller(parse_size(token, &value)?),
        _ => {
            return Err(Error::validation(format!(
                "unknown search term {token:?}: known keys are from to cc subject tag label in \
                 mailbox account is has before after older_than newer_than larger smaller"
            )));
        }
    };
    Ok(term)
}

/// Parses a query. `now` (seconds since the epoch) anchors `older_than:`/`newer_than:`.
pub fn parse(input: &str, now: i64) -> Result<Query, Error> {
    let mut terms = Vec::new();
    for (pos, token) in tokens(input)? {
        let term =
            term_of(&token, now).map_err(|e| e.context(format!("at position {}", pos + 1)))?;
        terms.push(term);
    }
    Ok(Query { terms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_flags_text_and_negation() {
        let q = parse(
            r#"from:alice subject:"big news" is:unread -tag:done invoice"#,
            0,
        )
        .unwrap();
        assert_eq!(
            q.terms,
            vec![
                Term::From("alice".into()),
                Term::Subject("big news".into()),
                Term::Read(false),
                Term::Not(Box::new(Term::Tag("done".into()))),
                Term::Text("invoice".into()),
            ]
        );
    }

    #[test]
    fn dates_sizes_and_ages() {
        let q = parse("after:2024-01-02 larger:2K newer_than:1w", 1_000_000).unwrap();
        assert_eq!(
            q.terms,
            vec![
                Term::After(1_704_153_600),
                Term::Larger(2048),
                Term::After(1_000_000 - 7 * 86_400)
            ]
        );
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = parse("from:a bogus:x", 0).unwrap_err();
        assert_eq!(e.error_type(), "validation_error");
        assert!(e.message().contains("position 8"), "{}", e.message());
        assert!(e.message().contains("bogus:x"));
        let e = parse("subject:\"open", 0).unwrap_err();
        assert_eq!(e.error_type(), "validation_error");
        assert_eq!(parse("a OR b", 0).unwrap_err().error_type(), "unsupported");
    }
}
