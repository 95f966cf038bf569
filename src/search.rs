//! The query DSL of SPEC §7, parsed into terms. Turning terms into SQL is the store's job.
//!
//! Supported now: `from:` `to:` `cc:` `subject:` `tag:`/`label:` `in:`/`mailbox:` `account:`
//! `is:unread|read|flagged|starred|unflagged` `has:attachment` `before:`/`after:` (YYYY-MM-DD)
//! `older_than:`/`newer_than:` (`7d` `2w` `3m` `1y`) `larger:`/`smaller:` (`5M` `200K`),
//! `"quoted phrases"`, bare words (full text), and `-term` negation. Terms AND together.
//! `in:anywhere` names every mailbox: a selection that changes or stages messages must not be
//! empty (`parse_selection`), so everything is asked for in words.
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
    /// `in:anywhere`: every mailbox, for a selection that means everything on purpose.
    Anywhere,
    Not(Box<Term>),
}

/// Most terms in one query: each becomes a condition of one SQL statement, and SQLite's
/// expression depth is limited.
pub const MAX_TERMS: usize = 1000;

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
        Some([y, m, d])
            if (1..=9999).contains(y)
                && (1..=12).contains(m)
                && (1..=days_in_month(*y, *m)).contains(d) =>
        {
            Ok(days_from_civil(*y, *m, *d) * 86_400)
        }
        _ => Err(Error::validation(format!(
            "{token}: expected a date as YYYY-MM-DD (a day that exists)"
        ))),
    }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        _ => 31,
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

/// A value's number and its one-character unit suffix (any character, not only ASCII).
fn split_unit(value: &str) -> (&str, Option<char>) {
    match value.char_indices().last() {
        Some((i, c)) if !c.is_ascii_digit() => (&value[..i], Some(c)),
        _ => (value, None),
    }
}

fn too_large(token: &str) -> Error {
    Error::validation(format!("{token}: the number is too large"))
}

/// An age in seconds; checked, so a huge number is an error rather than a wrapped one.
fn parse_age(token: &str, value: &str) -> Result<i64, Error> {
    let (num, unit) = split_unit(value);
    let n: i64 = num.parse().map_err(|_| {
        Error::validation(format!(
            "{token}: expected a number and a unit, like 7d, 2w, 3m, 1y"
        ))
    })?;
    let days_per = match unit {
        Some('d') => 1,
        Some('w') => 7,
        Some('m') => 30,
        Some('y') => 365,
        _ => {
            return Err(Error::validation(format!(
                "{token}: the unit must be d, w, m or y"
            )));
        }
    };
    n.checked_mul(days_per)
        .and_then(|days| days.checked_mul(86_400))
        .ok_or_else(|| too_large(token))
}

/// A size in bytes, at most what SQLite's signed integers hold.
fn parse_size(token: &str, value: &str) -> Result<u64, Error> {
    let (num, unit) = split_unit(value);
    let mult: u64 = match unit.map(|c| c.to_ascii_uppercase()) {
        None => 1,
        Some('K') => 1024,
        Some('M') => 1024 * 1024,
        Some('G') => 1024 * 1024 * 1024,
        Some(_) => {
            return Err(Error::validation(format!(
                "{token}: the unit must be K, M or G"
            )));
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| Error::validation(format!("{token}: expected a size like 200K or 5M")))?;
    n.checked_mul(mult)
        .filter(|bytes| i64::try_from(*bytes).is_ok())
        .ok_or_else(|| too_large(token))
}

fn term_of(token: &str, now: i64) -> Result<Term, Error> {
    // Negation by leading dashes, counted rather than recursed into: a long run of them is
    // one token, not a deep call stack. An even number cancels out.
    let rest = token.trim_start_matches('-');
    if rest.len() < token.len() && !rest.is_empty() {
        let term = positive_term(rest, now)?;
        return Ok(match (token.len() - rest.len()) % 2 {
            1 => Term::Not(Box::new(term)),
            _ => term,
        });
    }
    positive_term(token, now)
}

fn positive_term(token: &str, now: i64) -> Result<Term, Error> {
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
        "in" | "mailbox" if value.eq_ignore_ascii_case("anywhere") => Term::Anywhere,
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
        "older_than" => Term::Before(
            now.checked_sub(parse_age(token, &value)?)
                .ok_or_else(|| too_large(token))?,
        ),
        "newer_than" => Term::After(
            now.checked_sub(parse_age(token, &value)?)
                .ok_or_else(|| too_large(token))?,
        ),
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
    let tokens = tokens(input)?;
    if tokens.len() > MAX_TERMS {
        return Err(Error::validation(format!(
            "the query has {} terms; at most {MAX_TERMS} are allowed",
            tokens.len()
        ))
        .with_next_step("narrow it with fewer, broader terms"));
    }
    let mut terms = Vec::new();
    for (pos, token) in tokens {
        let term =
            term_of(&token, now).map_err(|e| e.context(format!("at position {}", pos + 1)))?;
        terms.push(term);
    }
    Ok(Query { terms })
}

/// Parses a query that selects messages to change or stage for deletion. An empty one would
/// select every message, so it is refused: everything must be asked for in words.
pub fn parse_selection(input: &str, now: i64) -> Result<Query, Error> {
    let query = parse(input, now)?;
    if query.terms.is_empty() {
        return Err(Error::validation(
            "an empty query would select every message; nothing was changed",
        )
        .with_next_step("give search terms, or write in:anywhere to mean every message"));
    }
    Ok(query)
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
    fn numbers_too_large_and_odd_units_are_refused() {
        for q in [
            "larger:18446744073709551615",
            "larger:8589934592G",
            "smaller:9223372036854775808",
            "older_than:9223372036854775807d",
            "newer_than:106751991167300y",
            "newer_than:1é",
            "larger:5é",
        ] {
            let e = parse(q, 1_000_000).unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{q}");
        }
        assert_eq!(
            parse("larger:9223372036854775807", 0).unwrap().terms,
            vec![Term::Larger(i64::MAX as u64)]
        );
    }

    #[test]
    fn impossible_dates_are_refused() {
        for q in [
            "before:2026-02-31",
            "after:2025-02-29",
            "before:2026-04-31",
            "before:0-01-01",
        ] {
            assert_eq!(
                parse(q, 0).unwrap_err().error_type(),
                "validation_error",
                "{q}"
            );
        }
        parse("before:2024-02-29", 0).unwrap();
    }

    #[test]
    fn dashes_negate_by_parity_without_recursion() {
        let q = format!("{}from:a", "-".repeat(100_001));
        assert_eq!(
            parse(&q, 0).unwrap().terms,
            vec![Term::Not(Box::new(Term::From("a".into())))]
        );
        assert_eq!(parse("--x", 0).unwrap().terms, vec![Term::Text("x".into())]);
    }

    #[test]
    fn a_selection_needs_words_and_few_enough_terms() {
        for q in ["", "   ", "\t\n"] {
            let e = parse_selection(q, 0).unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{q:?}");
            assert!(e.next_step().unwrap().contains("in:anywhere"));
        }
        assert_eq!(
            parse_selection("in:anywhere", 0).unwrap().terms,
            vec![Term::Anywhere]
        );
        let many = vec!["x"; MAX_TERMS + 1].join(" ");
        assert_eq!(
            parse(&many, 0).unwrap_err().error_type(),
            "validation_error"
        );
        parse(&vec!["x"; MAX_TERMS].join(" "), 0).unwrap();
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
