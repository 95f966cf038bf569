//! A rule in mailbroker's terms (`Rule`) as a Gmail filter (`users.settings.filters`): its
//! criteria as Gmail has them (`from`, `subject`, `hasAttachment`, `size` for the terms a
//! rule is all of; every other term in `query`, Gmail's own search language, which
//! mailbroker's follows), and its action as labels added and removed. A filter has no name:
//! a filter on the server is mailbroker's rule when it is exactly that rule's filter.

use google_gmail1::api as gmail;
use mailbroker_core::{Condition, Error, Result, Role, Rule};
use serde_json::{Map, Value};

/// Most filters Gmail keeps for a user (`filters.create`: "a maximum of 1,000 filters").
pub const MAX_FILTERS: usize = 1000;

fn refused(term: &str, why: &str) -> Error {
    Error::validation(format!(
        "{term} cannot be a condition of a Gmail filter: {why}"
    ))
    .with_next_step("write the rule without it, or stage the matching mail by hand instead")
}

/// A value as Gmail's search reads it: as it is, or quoted when it holds a space. Gmail's
/// search has no escape, so a value it would read as its own syntax is refused.
fn value(term: &str, v: &str) -> Result<String> {
    let syntax = |c: char| matches!(c, '"' | '(' | ')' | '{' | '}') || c.is_control();
    if v.trim().is_empty() || v.chars().any(syntax) {
        return Err(refused(
            term,
            "Gmail's search cannot hold quotes, brackets or braces in a value",
        ));
    }
    Ok(match v.contains(char::is_whitespace) {
        true => format!("\"{v}\""),
        false => v.to_string(),
    })
}

fn size(term: &str, n: u64) -> Result<i32> {
    i32::try_from(n).map_err(|_| refused(term, "Gmail's sizes stop at 2 GB"))
}

/// `c` as a term of Gmail's search.
fn term(c: &Condition) -> Result<String> {
    let t = c.term();
    Ok(match c {
        Condition::From(v) => format!("from:{}", value(&t, v)?),
        Condition::To(v) => format!("to:{}", value(&t, v)?),
        Condition::Cc(v) => format!("cc:{}", value(&t, v)?),
        Condition::Subject(v) => format!("subject:{}", value(&t, v)?),
        Condition::List(Some(v)) => format!("list:{}", value(&t, v)?),
        Condition::List(None) => {
            return Err(refused(&t, "Gmail's search has no term for any list"));
        }
        Condition::HasAttachment => "has:attachment".into(),
        Condition::Larger(n) => format!("larger:{}", size(&t, *n)?),
        Condition::Smaller(n) => format!("smaller:{}", size(&t, *n)?),
        Condition::Not(inner) => format!("-{}", term(inner)?),
        Condition::All(items) => format!("({})", joined(items, " ")?),
        Condition::Any(items) => format!("({})", joined(items, " OR ")?),
    })
}

fn joined(items: &[Condition], by: &str) -> Result<String> {
    Ok(items.iter().map(term).collect::<Result<Vec<_>>>()?.join(by))
}

fn criteria(when: &Condition) -> Result<gmail::FilterCriteria> {
    let mut c = gmail::FilterCriteria::default();
    let mut query = Vec::new();
    let all = match when {
        Condition::All(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    for item in all {
        match item {
            Condition::From(v) if c.from.is_none() => c.from = Some(value(&item.term(), v)?),
            Condition::Subject(v) if c.subject.is_none() => {
                c.subject = Some(value(&item.term(), v)?)
            }
            Condition::HasAttachment => c.has_attachment = Some(true),
            Condition::Larger(n) | Condition::Smaller(n) if c.size.is_none() => {
                c.size = Some(size(&item.term(), *n)?);
                let larger = matches!(item, Condition::Larger(_));
                c.size_comparison = Some(if larger { "larger" } else { "smaller" }.into());
            }
            other => query.push(term(other)?),
        }
    }
    c.query = (!query.is_empty()).then(|| query.join(" "));
    Ok(c)
}

/// The label that moves arriving mail out of the inbox, if `rule` moves it: Gmail's filters
/// can only archive (a label is a tag, `--add-tag`); never to the trash or spam, never
/// elsewhere.
fn archives(rule: &Rule) -> Result<bool> {
    let Some(to) = rule.then.move_to.as_deref() else {
        return Ok(false);
    };
    let role = Role::parse(to).or(match to {
        crate::convert::ALL_MAIL => Some(Role::Archive),
        _ => None,
    });
    match role {
        Some(Role::Archive) => Ok(true),
        _ => Err(Error::validation(format!(
            "a Gmail filter cannot move mail to {to:?}: it can archive it, or label it"
        ))
        .with_next_step("use --move-to archive, or --add-tag LABEL")),
    }
}

/// `rule` as the filter Gmail will be given. `label` gives a tag's label id (`None`: Gmail
/// has no such label yet; it is made first, and `label` is asked again).
pub fn filter(rule: &Rule, label: impl Fn(&str) -> Option<String>) -> Result<gmail::Filter> {
    rule.validate()?;
    let mut add = Vec::new();
    let mut remove = Vec::new();
    for tag in &rule.then.add_tags {
        crate::validate_tag(tag)?;
        add.push(label(tag).unwrap_or_else(|| format!("{tag} (new label)")));
    }
    if rule.then.flagged == Some(true) {
        add.push("STARRED".into());
    }
    if rule.then.read == Some(true) {
        remove.push("UNREAD".into());
    }
    if archives(rule)? {
        remove.push("INBOX".into());
    }
    Ok(gmail::Filter {
        id: None,
        criteria: Some(criteria(&rule.when)?),
        action: Some(gmail::FilterAction {
            add_label_ids: (!add.is_empty()).then_some(add),
            remove_label_ids: (!remove.is_empty()).then_some(remove),
            forward: None,
        }),
    })
}

/// What of a filter says what it does, for comparing one read back with one written: its
/// criteria and action without its id, empty parts left out, label lists in order.
pub fn essence(filter: &gmail::Filter) -> Value {
    let part = |v: Value| -> Value {
        let kept: Map<String, Value> = (v.as_object().cloned().unwrap_or_default())
            .into_iter()
            .filter(|(_, v)| !(v.is_null() || v == &Value::Array(vec![])))
            .map(|(k, v)| match v {
                Value::Array(mut items) => {
                    items.sort_by_key(Value::to_string);
                    (k, Value::Array(items))
                }
                v => (k, v),
            })
            .collect();
        Value::Object(kept)
    };
    let of = |v: Option<Value>| part(v.unwrap_or_default());
    serde_json::json!({
        "criteria": of(filter.criteria.as_ref().and_then(|c| serde_json::to_value(c).ok())),
        "action": of(filter.action.as_ref().and_then(|a| serde_json::to_value(a).ok())),
    })
}

/// A person's filter as `rule list` names it: what it matches.
pub fn describe(filter: &gmail::Filter) -> String {
    let essence = essence(filter);
    let criteria = (essence["criteria"].as_object().cloned().unwrap_or_default())
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}:{s}"),
            v => format!("{k}:{v}"),
        })
        .collect::<Vec<_>>()
        .join(" ");
    format!("filter {}: {criteria}", filter.id.as_deref().unwrap_or("?"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbroker_core::Patch;

    fn rule(query: &str, when: Condition, then: Patch) -> Rule {
        Rule {
            name: "r".into(),
            query: query.into(),
            when,
            then,
        }
    }

    #[test]
    fn terms_a_rule_is_all_of_go_in_criteria_and_the_rest_in_gmails_search() {
        let when = Condition::All(vec![
            Condition::From("news".into()),
            Condition::Larger(5000),
            Condition::Any(vec![
                Condition::Subject("weekly digest".into()),
                Condition::Not(Box::new(Condition::List(Some("x.example".into())))),
            ]),
        ]);
        let then = Patch {
            move_to: Some("archive".into()),
            add_tags: vec!["News".into()],
            read: Some(true),
            ..Patch::default()
        };
        let f = filter(&rule("q", when, then), |_| Some("Label_7".into())).unwrap();
        let c = f.criteria.unwrap();
        assert_eq!(c.from.as_deref(), Some("news"));
        assert_eq!(
            (c.size, c.size_comparison.as_deref()),
            (Some(5000), Some("larger"))
        );
        assert_eq!(
            c.query.as_deref(),
            Some("(subject:\"weekly digest\" OR -list:x.example)")
        );
        let a = f.action.unwrap();
        assert_eq!(a.add_label_ids, Some(vec!["Label_7".to_string()]));
        assert_eq!(
            a.remove_label_ids,
            Some(vec!["UNREAD".to_string(), "INBOX".to_string()])
        );
        assert!(a.forward.is_none());
    }

    #[test]
    fn what_gmail_cannot_say_is_refused_by_name() {
        let read = Patch {
            read: Some(true),
            ..Patch::default()
        };
        for (when, naming) in [
            (Condition::Subject("a \"b\"".into()), "subject:"),
            (Condition::From("(x)".into()), "from:"),
            (Condition::List(None), "list:*"),
            (Condition::Larger(1 << 40), "larger:"),
        ] {
            let e = filter(&rule("q", when, read.clone()), |_| None).unwrap_err();
            assert_eq!(e.error_type(), "validation_error");
            assert!(e.to_string().contains(naming), "{e}");
        }
        for to in ["trash", "junk", "inbox"] {
            let then = Patch {
                move_to: Some(to.into()),
                ..Patch::default()
            };
            let e = filter(&rule("q", Condition::From("a".into()), then), |_| None);
            assert!(e.is_err(), "{to}");
        }
    }
}
