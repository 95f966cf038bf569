//! mailbroker's search language (SPEC §7), parsed into a typed tree; this crate does nothing
//! else. Turning the tree into SQL is the store's job (`mailbroker-store`'s `query.rs`), with
//! every value bound as a parameter: nothing from a query is ever spliced into SQL text.
//!
//! Terms: `from:` `to:` `cc:` `subject:` `tag:`/`label:` `in:`/`mailbox:` `account:`
//! `is:unread|read|flagged|starred|unflagged|list` `has:attachment` `list:` (`list:*`) `thread:` `before:`/`after:` (YYYY-MM-DD)
//! `older_than:`/`newer_than:` (`7d` `2w` `3m` `1y`) `larger:`/`smaller:` (`5M` `200K`),
//! `"quoted phrases"` and bare words (full text). Words side by side must all hold (`AND` may
//! be written); `OR` or `|` between them, `( … )` to group, `{a b}` for "any of", and `-`
//! before a word or a group negates it. NOT binds tightest, then AND, then OR.
//! `in:anywhere` names every mailbox: a selection that changes or stages messages must not be
//! empty (`parse_selection`), so everything is asked for in words.

mod parser;
mod terms;

use mailbroker_core::Error;

/// One condition on a message.
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
    /// From a mailing list: this one (a part of its id, `list:news.example.org`), or any
    /// (`list:*`, `is:list`).
    List(Option<String>),
    /// In this conversation (the `thread` id search rows carry).
    Thread(String),
    /// The account's own server's verdict (`Authentication-Results`): `pass`, `fail`, or
    /// `none` (no verdict, or not read).
    Auth(String),
    /// Seconds since the epoch: the message date is before / on-or-after this instant.
    Before(i64),
    After(i64),
    Larger(u64),
    Smaller(u64),
    /// `in:anywhere`: every mailbox, for a selection that means everything on purpose.
    Anywhere,
}

/// Whether a header value's last word also matches longer words (`from:ali` finds `alice`):
/// only when the value ends in a letter or digit. A value that ends in punctuation pins its
/// last word's end, so `from:sender5@` finds `sender5@…` and never `sender50@…`.
pub fn last_word_open(value: &str) -> bool {
    value.chars().last().is_some_and(char::is_alphanumeric)
}

/// A query's tree. `And(vec![])` holds for every message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Term(Term),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    /// All of `items`, with nested ANDs flattened and a single item left as it is.
    pub fn all(items: Vec<Expr>) -> Expr {
        Self::joined(items, true)
    }

    /// Any of `items`, flattened likewise.
    pub fn any(items: Vec<Expr>) -> Expr {
        Self::joined(items, false)
    }

    /// Calls `f` on every term of the tree.
    pub fn for_each_term(&self, f: &mut impl FnMut(&Term)) {
        match self {
            Expr::Term(term) => f(term),
            Expr::Not(inner) => inner.for_each_term(f),
            Expr::And(items) | Expr::Or(items) => items.iter().for_each(|e| e.for_each_term(f)),
        }
    }

    fn joined(items: Vec<Expr>, all: bool) -> Expr {
        let mut flat = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Expr::And(inner) if all => flat.extend(inner),
                Expr::Or(inner) if !all && !inner.is_empty() => flat.extend(inner),
                other => flat.push(other),
            }
        }
        match (flat.len(), all) {
            (1, _) => flat.remove(0),
            (_, true) => Expr::And(flat),
            (_, false) => Expr::Or(flat),
        }
    }
}

/// Most terms in one query: each becomes a condition of one SQL statement, and SQLite's
/// expression depth is limited.
pub const MAX_TERMS: usize = 1000;

/// Deepest nesting of brackets.
pub const MAX_DEPTH: usize = 32;

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub root: Expr,
}

impl Query {
    /// Whether the query has no terms at all (it would match every message).
    pub fn is_empty(&self) -> bool {
        matches!(&self.root, Expr::And(items) if items.is_empty())
    }

    /// The query, restricted to one account.
    pub fn in_account(self, account: &str) -> Query {
        let only = Expr::Term(Term::Account(account.to_string()));
        Query {
            root: Expr::all(vec![self.root, only]),
        }
    }
}

/// Parses a query. `now` (seconds since the epoch) anchors `older_than:`/`newer_than:`.
pub fn parse(input: &str, now: i64) -> Result<Query, Error> {
    Ok(Query {
        root: parser::parse_expr(input, now)?,
    })
}

/// Parses a query that selects messages to change or stage for deletion. An empty one would
/// select every message, so it is refused: everything must be asked for in words.
pub fn parse_selection(input: &str, now: i64) -> Result<Query, Error> {
    let query = parse(input, now)?;
    if query.is_empty() {
        return Err(Error::validation(
            "an empty query would select every message; nothing was changed",
        )
        .with_next_step("give search terms, or write in:anywhere to mean every message"));
    }
    Ok(query)
}

#[cfg(test)]
mod tests;
