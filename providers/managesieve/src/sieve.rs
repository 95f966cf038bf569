//! A rule in mailbroker's terms (`Rule`) as Sieve (RFC 5228, with `fileinto`, `imap4flags`,
//! `mailbox` and `regex`): one `if` block a rule. Every value is written as a quoted string;
//! header terms match as mailbroker's search does, word by word from a word's start (a
//! regular expression built only of the value's letters and digits, so nothing of it is
//! read as an operator); a term Sieve cannot say exactly is refused, naming it.

use std::collections::BTreeSet;

use mailbroker_core::{Condition, Error, Result, Rule};

use crate::section::{Part, quotable, quote};

/// A rule as Sieve: its `if` block and the extensions it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    pub requires: BTreeSet<&'static str>,
    pub text: String,
}

/// mailbroker's part of a script for `rules`, in order.
pub fn part(rules: &[Translated]) -> Part {
    let requires: BTreeSet<&str> = rules
        .iter()
        .flat_map(|r| r.requires.iter().copied())
        .collect();
    Part {
        requires: requires.into_iter().map(str::to_string).collect(),
        rules: rules
            .iter()
            .map(|r| r.text.as_str())
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// `rule` as Sieve; `mailbox` is the mailbox its move names (a role already resolved to the
/// account's mailbox).
pub fn translate(rule: &Rule, mailbox: Option<&str>) -> Result<Translated> {
    rule.validate()?;
    let mut requires = BTreeSet::new();
    let test = test(&rule.when, &mut requires)?;
    let mut body = String::new();
    let mut flag = |value: &str, requires: &mut BTreeSet<&'static str>| {
        requires.insert("imap4flags");
        body.push_str(&format!("  addflag {};\r\n", quote(value)));
    };
    for tag in &rule.then.add_tags {
        keyword(tag)?;
        flag(tag, &mut requires);
    }
    if rule.then.read == Some(true) {
        flag("\\Seen", &mut requires);
    }
    if rule.then.flagged == Some(true) {
        flag("\\Flagged", &mut requires);
    }
    if let Some(mailbox) = mailbox {
        if !quotable(mailbox) {
            return Err(Error::validation(format!(
                "the mailbox {mailbox:?} cannot be named in a Sieve rule"
            )));
        }
        requires.extend(["fileinto", "mailbox"]);
        body.push_str(&format!("  fileinto :create {};\r\n", quote(mailbox)));
    }
    // The name was checked (`Rule::validate`): one line, so the comment stays one.
    let text = format!("# rule: {}\r\nif {test} {{\r\n{body}}}\r\n", rule.name);
    Ok(Translated { requires, text })
}

fn unsupported(c: &Condition) -> Error {
    Error::validation(format!(
        "{} cannot be a condition of a Sieve rule: Sieve cannot say it exactly",
        c.term()
    ))
    .with_next_step("write the rule without it, or stage the matching mail by hand instead")
}

fn test(c: &Condition, requires: &mut BTreeSet<&'static str>) -> Result<String> {
    let list = |items: &[Condition], requires: &mut BTreeSet<&'static str>| {
        items
            .iter()
            .map(|i| test(i, requires))
            .collect::<Result<Vec<_>>>()
            .map(|tests| tests.join(", "))
    };
    Ok(match c {
        Condition::From(v) => words("from", v, requires)?,
        Condition::To(v) => words("to", v, requires)?,
        Condition::Cc(v) => words("cc", v, requires)?,
        Condition::Subject(v) => words("subject", v, requires)?,
        // The List-Id header only: a rule sees the id a list names itself by.
        Condition::List(None) => "exists \"list-id\"".into(),
        Condition::List(Some(v)) => {
            requires.insert("regex");
            let pattern = format!("<[^>]*{}[^>]*>", regex_literal(v));
            format!("header :regex \"list-id\" {}", quote(&pattern))
        }
        Condition::Larger(n) => format!("size :over {n}"),
        Condition::Smaller(n) => format!("size :under {n}"),
        Condition::Not(inner) => format!("not {}", test(inner, requires)?),
        Condition::All(items) if items.is_empty() => return Err(everything()),
        Condition::Any(items) if items.is_empty() => return Err(everything()),
        Condition::All(items) => format!("allof({})", list(items, requires)?),
        Condition::Any(items) => format!("anyof({})", list(items, requires)?),
        Condition::HasAttachment => return Err(unsupported(c)),
    })
}

fn everything() -> Error {
    Error::validation("a rule needs a condition: one that every message meets is refused")
        .with_next_step("give --when a query such as from:news@example.org")
}

/// A header term as mailbroker's search reads it: the value's words in order, the first from
/// a word's start, the last open (a prefix) unless the value ends in punctuation.
fn words(header: &str, value: &str, requires: &mut BTreeSet<&'static str>) -> Result<String> {
    let tokens: Vec<&str> = value
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Err(Error::validation(format!(
            "{header}:{value} has no letter or digit to match"
        )));
    }
    let open = value.chars().last().is_some_and(char::is_alphanumeric);
    let end = if open { "" } else { "([^[:alnum:]]|$)" };
    let pattern = format!("(^|[^[:alnum:]]){}{end}", tokens.join("[^[:alnum:]]+"));
    requires.insert("regex");
    Ok(format!(
        "header :regex {} {}",
        quote(header),
        quote(&pattern)
    ))
}

/// `text` matched literally inside a POSIX extended regular expression.
fn regex_literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.[]()*+?{}|^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A tag as an IMAP keyword, which `addflag` takes: one atom (a space would make two flags).
fn keyword(tag: &str) -> Result<()> {
    let atom = |c: char| c.is_ascii_graphic() && !"(){%*\"\\]".contains(c);
    match !tag.is_empty() && tag.chars().all(atom) {
        true => Ok(()),
        false => Err(Error::validation(format!(
            "the tag {tag:?} cannot be an IMAP keyword: one word of ASCII letters, digits and $-_. only"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbroker_core::Patch;

    fn rule(when: Condition, then: Patch) -> Rule {
        Rule {
            name: "news".into(),
            query: String::new(),
            when,
            then,
        }
    }

    fn tagged() -> Patch {
        Patch {
            add_tags: vec!["$news".into()],
            read: Some(true),
            ..Patch::default()
        }
    }

    #[test]
    fn conditions_and_actions_become_one_if_block() {
        let when = Condition::All(vec![
            Condition::From("news@example.org".into()),
            Condition::Not(Box::new(Condition::Subject("urgent".into()))),
            Condition::Any(vec![Condition::Larger(1000), Condition::List(None)]),
        ]);
        let t = translate(&rule(when, tagged()), Some("Archive")).unwrap();
        assert_eq!(
            t.text,
            "# rule: news\r\nif allof(header :regex \"from\" \"(^|[^[:alnum:]])news[^[:alnum:]]+example[^[:alnum:]]+org\", \
             not header :regex \"subject\" \"(^|[^[:alnum:]])urgent\", anyof(size :over 1000, exists \"list-id\")) {\r\n  \
             addflag \"$news\";\r\n  addflag \"\\\\Seen\";\r\n  fileinto :create \"Archive\";\r\n}\r\n"
        );
        let wanted: BTreeSet<&str> = ["fileinto", "imap4flags", "mailbox", "regex"].into();
        assert_eq!(t.requires, wanted);
    }

    #[test]
    fn a_value_is_only_ever_a_string_and_a_closed_value_pins_its_end() {
        let t = translate(
            &rule(Condition::From("a\"b; stop; \\".into()), tagged()),
            Some("Weird \"box\""),
        )
        .unwrap();
        assert!(
            t.text
                .contains("(^|[^[:alnum:]])a[^[:alnum:]]+b[^[:alnum:]]+stop([^[:alnum:]]|$)"),
            "{}",
            t.text
        );
        assert!(
            t.text.contains("fileinto :create \"Weird \\\"box\\\"\";"),
            "{}",
            t.text
        );
        let list = translate(
            &rule(Condition::List(Some("news.example.org".into())), tagged()),
            None,
        )
        .unwrap();
        assert!(
            list.text
                .contains("\"<[^>]*news\\\\.example\\\\.org[^>]*>\""),
            "{}",
            list.text
        );
    }

    #[test]
    fn what_sieve_cannot_say_or_a_rule_may_not_do_is_refused() {
        let e = translate(&rule(Condition::HasAttachment, tagged()), None).unwrap_err();
        assert!(e.message().contains("has:attachment"), "{}", e.message());
        let e = translate(&rule(Condition::Any(vec![]), tagged()), None).unwrap_err();
        assert_eq!(e.error_type(), "validation_error");
        for tag in ["two words", "a\"b", "\\Seen", ""] {
            let then = Patch {
                add_tags: vec![tag.into()],
                ..Patch::default()
            };
            assert!(
                translate(&rule(Condition::From("x".into()), then), None).is_err(),
                "{tag:?}"
            );
        }
    }
}
