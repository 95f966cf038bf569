//! The terms of the query language: what one word (`from:alice`, `before:2026-01-31`,
//! `"exact phrase"`) means. Grouping and negation are the parser's (`parser.rs`).

use mailbroker_core::Error;

use super::Term;

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

/// Whether `num` is a count: digits only. Rust's parsers take a sign too, and a negative age
/// (`older_than:-5d`) would mean "older than five days from now": every message.
fn unsigned(token: &str, num: &str) -> Result<(), Error> {
    if num.is_empty() || num.chars().all(|c| c.is_ascii_digit()) {
        return Ok(());
    }
    Err(Error::validation(format!(
        "{token}: ages and sizes are counts, without a sign"
    ))
    .with_next_step("write the number alone, like older_than:5d or larger:200K"))
}

/// An age in seconds; checked, so a huge number is an error rather than a wrapped one.
fn parse_age(token: &str, value: &str) -> Result<i64, Error> {
    let (num, unit) = split_unit(value);
    unsigned(token, num)?;
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
    unsigned(token, num)?;
    let n: u64 = num
        .parse()
        .map_err(|_| Error::validation(format!("{token}: expected a size like 200K or 5M")))?;
    n.checked_mul(mult)
        .filter(|bytes| i64::try_from(*bytes).is_ok())
        .ok_or_else(|| too_large(token))
}

/// The term one query word names: `key:value`, or full-text words.
pub(super) fn term_of(token: &str, now: i64) -> Result<Term, Error> {
    let Some((key, value)) = token.split_once(':').filter(|(k, _)| !k.starts_with('"')) else {
        let text = unquote(token);
        // The full-text index holds words (letters and digits): a phrase without one matches
        // no message, so its negation, `-""`, would match every message.
        if !text.chars().any(char::is_alphanumeric) {
            return Err(Error::validation(format!(
                "{token:?} holds no letter or digit, so it would match no message (and its \
                 negation every one)"
            ))
            .with_next_step(
                "search for words; for punctuation in an address use a header term (from:@)",
            ));
        }
        return Ok(Term::Text(text));
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
        "list" if value == "*" => Term::List(None),
        "list" => Term::List(Some(value)),
        "thread" => Term::Thread(value),
        "auth" => match value.to_ascii_lowercase().as_str() {
            v @ ("pass" | "fail" | "none") => Term::Auth(v.to_string()),
            _ => {
                return Err(Error::validation(format!(
                    "{token:?}: auth: takes pass, fail or none"
                )));
            }
        },
        "is" => match value.to_ascii_lowercase().as_str() {
            "unread" => Term::Read(false),
            "read" => Term::Read(true),
            "flagged" | "starred" => Term::Flagged(true),
            "unflagged" | "unstarred" => Term::Flagged(false),
            "list" => Term::List(None),
            _ => {
                return Err(Error::validation(format!(
                    "{token:?}: is: takes unread, read, flagged, starred, unflagged or list"
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
                 mailbox account list thread is has before after older_than newer_than larger smaller"
            )));
        }
    };
    Ok(term)
}
