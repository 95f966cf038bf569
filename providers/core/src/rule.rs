//! A server-side rule in mailbroker's terms: a condition on arriving mail and what to do to it,
//! which each provider translates into its own (a Sieve script section, a Gmail filter, a
//! Graph messageRule). What it does is a `Patch` limited to what a rule may do: move, add
//! tags, mark read, flag. Never forward, redirect, reply, reject, discard or delete: no such
//! action can even be written here.

use serde::{Deserialize, Serialize};

use crate::{Error, Patch, Result};

/// What arriving mail must match, in the terms of mailbroker's search language a rule may
/// use (`from:`, `to:`, `cc:`, `subject:`, `list:`, `has:attachment`, `larger:`, `smaller:`),
/// joined by AND, OR and NOT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    From(String),
    To(String),
    Cc(String),
    Subject(String),
    /// From this mailing list (a part of its id), or from any (`None`).
    List(Option<String>),
    HasAttachment,
    /// Bytes: larger than / smaller than.
    Larger(u64),
    Smaller(u64),
    Not(Box<Condition>),
    All(Vec<Condition>),
    Any(Vec<Condition>),
}

impl Condition {
    /// The search term it is, as a person types it, for an error that names it.
    pub fn term(&self) -> String {
        match self {
            Condition::From(v) => format!("from:{v}"),
            Condition::To(v) => format!("to:{v}"),
            Condition::Cc(v) => format!("cc:{v}"),
            Condition::Subject(v) => format!("subject:{v}"),
            Condition::List(Some(v)) => format!("list:{v}"),
            Condition::List(None) => "list:*".into(),
            Condition::HasAttachment => "has:attachment".into(),
            Condition::Larger(n) => format!("larger:{n}"),
            Condition::Smaller(n) => format!("smaller:{n}"),
            Condition::Not(_) => "-( … )".into(),
            Condition::All(_) => "( … AND … )".into(),
            Condition::Any(_) => "( … OR … )".into(),
        }
    }
}

/// A rule: its name (how `rule list` and `rule remove` know it), its condition, and what it
/// does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub name: String,
    /// The query it was written as, kept for the person to read.
    pub query: String,
    pub when: Condition,
    pub then: Patch,
}

/// A rule as the server has it: mailbroker's, or the person's own (a script, a filter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRule {
    pub name: String,
    /// Written by mailbroker.
    pub ours: bool,
    /// Run on arriving mail (an inactive Sieve script is not).
    pub enabled: bool,
    /// Sends mail elsewhere (forward, redirect): shown so the person sees it, and never
    /// written or changed by mailbroker.
    pub forwards: bool,
}

/// What a server's rules were before mailbroker changed them, as the adapter that changed
/// them reads it (the previous Sieve script, byte for byte): what an undo puts back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesBefore(pub String);

/// Longest rule name: it is shown in lists and written into a provider's rule.
pub const MAX_NAME: usize = 80;

impl Rule {
    /// Checks what a rule may be: a name a person can read (no control characters), and
    /// actions among move, add tags, mark read and flag, at least one of them.
    pub fn validate(&self) -> Result<()> {
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control)
        {
            return Err(Error::validation(format!(
                "a rule's name is 1 to {MAX_NAME} characters with no line break or control character"
            ))
            .with_next_step("give --name a short name, such as \"newsletters to Archive\""));
        }
        let p = &self.then;
        let undoing =
            !p.remove_tags.is_empty() || p.read == Some(false) || p.flagged == Some(false);
        if p.delete.is_some() || undoing {
            return Err(Error::validation(
                "a rule only moves, adds tags, marks read or flags: it never deletes, and never \
                 takes a tag, a read mark or a flag away",
            )
            .with_next_step("use --move-to, --add-tag, --read or --flag"));
        }
        let nothing =
            p.move_to.is_none() && p.add_tags.is_empty() && p.read.is_none() && p.flagged.is_none();
        if nothing {
            return Err(
                Error::validation("the rule does nothing to the mail it matches")
                    .with_next_step("give at least one of --move-to, --add-tag, --read, --flag"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(then: Patch) -> Rule {
        Rule {
            name: "news".into(),
            query: "from:news".into(),
            when: Condition::From("news".into()),
            then,
        }
    }

    #[test]
    fn a_rule_only_moves_tags_reads_or_flags() {
        let moves = Patch {
            move_to: Some("archive".into()),
            ..Patch::default()
        };
        rule(moves.clone()).validate().unwrap();
        for bad in [
            Patch::default(),
            Patch {
                delete: Some(crate::DeleteMode::Trash),
                ..Patch::default()
            },
            Patch {
                read: Some(false),
                ..Patch::default()
            },
            Patch {
                remove_tags: vec!["x".into()],
                ..moves.clone()
            },
        ] {
            let e = rule(bad.clone()).validate().unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{bad:?}");
        }
        for name in ["", "a\nstop;", &"x".repeat(81)] {
            let mut r = rule(moves.clone());
            r.name = name.into();
            assert!(r.validate().is_err(), "{name:?}");
        }
    }
}
