//! Server-side rules: the condition a person or an assistant writes in mailbroker's search
//! language, read as a rule's `Condition`. A rule sees arriving mail, so only the terms about
//! a message as it arrives may be used; any other is refused by name, never dropped.

use mailbroker_core::{Condition, Error, Result};
use mailbroker_query::{self as query, Expr, Term};

/// The terms a rule may use, for the refusal that names the others.
const ALLOWED: &str = "from:, to:, cc:, subject:, list:, has:attachment, larger:, smaller:";

/// `text` (a query) as a rule's condition.
pub fn condition(text: &str, now: i64) -> Result<Condition> {
    let parsed = query::parse(text, now)?;
    if parsed.is_empty() {
        return Err(Error::validation(
            "a rule needs a condition: an empty one would match every message",
        )
        .with_next_step(format!("give --when a query of {ALLOWED}")));
    }
    of(&parsed.root)
}

fn of(expr: &Expr) -> Result<Condition> {
    Ok(match expr {
        Expr::Term(term) => term_of(term)?,
        Expr::Not(inner) => Condition::Not(Box::new(of(inner)?)),
        Expr::And(items) => Condition::All(items.iter().map(of).collect::<Result<_>>()?),
        Expr::Or(items) => Condition::Any(items.iter().map(of).collect::<Result<_>>()?),
    })
}

fn term_of(term: &Term) -> Result<Condition> {
    let refused = |what: &str| {
        Error::validation(format!(
            "{what} cannot be a rule's condition: a rule sees mail as it arrives, by {ALLOWED}"
        ))
        .with_next_step("write the rule's condition with those terms only")
    };
    Ok(match term {
        Term::From(v) => Condition::From(v.clone()),
        Term::To(v) => Condition::To(v.clone()),
        Term::Cc(v) => Condition::Cc(v.clone()),
        Term::Subject(v) => Condition::Subject(v.clone()),
        Term::List(v) => Condition::List(v.clone()),
        Term::HasAttachment => Condition::HasAttachment,
        Term::Larger(n) => Condition::Larger(*n),
        Term::Smaller(n) => Condition::Smaller(*n),
        Term::Tag(v) => return Err(refused(&format!("tag:{v}"))),
        Term::Mailbox(v) => return Err(refused(&format!("in:{v}"))),
        Term::Account(v) => return Err(refused(&format!("account:{v}"))),
        Term::Text(v) => return Err(refused(&format!("the word {v:?} of a message's text"))),
        Term::Read(_) | Term::Flagged(_) => {
            return Err(refused("is:read, is:unread or is:flagged"));
        }
        Term::Thread(v) => return Err(refused(&format!("thread:{v}"))),
        Term::Auth(v) => return Err(refused(&format!("auth:{v}"))),
        Term::Before(_) | Term::After(_) => {
            return Err(refused(
                "a date (before:, after:, older_than:, newer_than:)",
            ));
        }
        Term::Anywhere => return Err(refused("in:anywhere")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_of_arrival_terms_is_a_condition_and_any_other_term_is_named() {
        let c = condition("from:news OR (list:shop -subject:receipt larger:5K)", 0).unwrap();
        assert_eq!(
            c,
            Condition::Any(vec![
                Condition::From("news".into()),
                Condition::All(vec![
                    Condition::List(Some("shop".into())),
                    Condition::Not(Box::new(Condition::Subject("receipt".into()))),
                    Condition::Larger(5 * 1024),
                ]),
            ])
        );
        for (query, named) in [
            ("from:a tag:Work", "tag:Work"),
            ("in:inbox", "in:inbox"),
            ("invoice", "\"invoice\""),
            ("is:unread", "is:read"),
            ("older_than:7d", "a date"),
        ] {
            let e = condition(query, 0).unwrap_err();
            assert_eq!(e.error_type(), "validation_error");
            assert!(e.message().contains(named), "{query}: {}", e.message());
        }
        assert!(condition("", 0).is_err());
    }
}
