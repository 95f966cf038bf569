//! A parsed query as SQL. Every value is bound, never spliced into the SQL text.
//!
//! Each term reads an index (BENCHMARKS.md, "Search beside notmuch"): words the full-text
//! index, senders, recipients and subjects the header index (`message_headers`), tags their
//! table, read and flagged state the state index beside its mailbox, dates, sizes, lists,
//! conversations and attachments their columns' indexes. A count reads those structures alone
//! where the query allows it (`count_sql`), and a page either sorts its few matches or walks
//! the date index from the newest message until it has enough (`push_page_ids`).

use super::Backend;
use super::postings::SetExpr;
use super::sql::Sql;
use mailbroker_query::{Expr, Query, Term};

/// Matches up to which a page reads each match and sorts; above it, walking the date index
/// from the newest message finds a page after about `limit × all / matches` rows.
pub(super) const SORTED_PAGE_UP_TO: u64 = 2_000;

/// FTS5 query text for user words: each word becomes a quoted string, so punctuation and
/// FTS operators in mail text are matched literally.
fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// Whether the header index can answer a value: it has a word in it. A value of punctuation
/// alone (`from:@`) is matched as a substring instead.
fn has_words(value: &str) -> bool {
    value.chars().any(char::is_alphanumeric)
}

/// `from:`, `to:`, `cc:` and `subject:` as the header index reads them: the value's words in
/// that order in that field, the last one also as the start of a word (`from:ali` finds
/// `alice@example.test`, `from:example.test` the whole domain) unless the value ends in
/// punctuation (`search::last_word_open`).
fn header_match(column: &str, value: &str) -> String {
    let star = if mailbroker_query::last_word_open(value) {
        " *"
    } else {
        ""
    };
    format!("{column} : {}{star}", fts_phrase(value))
}

/// A substring, case-insensitively (SQLite's LIKE is; PostgreSQL's ILIKE is).
fn push_like(q: &mut Sql, column: &str, value: &str) {
    let like = q.backend().pick(" LIKE ", " ILIKE ");
    q.push(column).push(like);
    q.push_bind(format!(
        "%{}%",
        value
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    ));
    q.push(" ESCAPE '\\'");
}

/// The header column a term reads, if it is a header term.
fn header_column(term: &Term) -> Option<(&'static str, &str)> {
    match term {
        Term::From(v) => Some(("from_addr", v)),
        Term::To(v) => Some(("to_addr", v)),
        Term::Cc(v) => Some(("cc_addr", v)),
        Term::Subject(v) => Some(("subject", v)),
        _ => None,
    }
}

/// A condition on one full-text index: phrases, in a message's words or (`column`) in one of
/// its header fields, joined by AND and OR.
#[derive(Clone)]
pub(super) enum Match {
    /// `value`'s words in order; in a header field, the last also as the start of a word
    /// when the value ends in one.
    Phrase {
        value: String,
        column: Option<&'static str>,
    },
    All(Vec<Match>),
    Any(Vec<Match>),
}

impl Match {
    /// FTS5's query text: each phrase quoted, so punctuation and FTS operators in mail text
    /// are matched literally.
    fn fts5(&self) -> String {
        let (items, joiner) = match self {
            Match::Phrase {
                value,
                column: None,
            } => return fts_phrase(value),
            Match::Phrase {
                value,
                column: Some(column),
            } => return header_match(column, value),
            Match::All(items) => (items, " AND "),
            Match::Any(items) => (items, " OR "),
        };
        let parts: Vec<String> = items.iter().map(|m| format!("({})", m.fts5())).collect();
        parts.join(joiner)
    }

    /// PostgreSQL's condition on a `words` column (`store::words`): a phrase without a word
    /// matches nothing, as FTS5's empty phrase does.
    fn push_tsquery(&self, q: &mut Sql) {
        let (items, joiner) = match self {
            Match::Phrase { value, column } => {
                match q.lexicon().and_then(|l| l.tsquery(value, *column)) {
                    Some(t) => q.push("words @@ CAST(").push_bind(t).push(" AS tsquery)"),
                    None => q.push("false"),
                };
                return;
            }
            Match::All(items) => (items, " AND "),
            Match::Any(items) => (items, " OR "),
        };
        q.push("(");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                q.push(joiner);
            }
            item.push_tsquery(q);
        }
        q.push(")");
    }

    /// The SELECT of the ids it matches in `table`: SQLite's FTS5 table, or PostgreSQL's.
    fn push_select(&self, q: &mut Sql, fts5: &str, words: &str) {
        match q.backend() {
            Backend::Sqlite => {
                q.push(format_args!(
                    "SELECT rowid AS id FROM {fts5} WHERE {fts5} MATCH "
                ));
                q.push_bind(self.fts5());
            }
            Backend::Postgres => {
                q.push(format_args!("SELECT id FROM {words} WHERE "));
                self.push_tsquery(q);
            }
        }
    }
}

/// A set of message ids read from one index: what a count can walk instead of messages.
pub(super) enum Posting {
    /// One full-text expression (words and phrases joined by AND/OR).
    Text(Match),
    /// One header-index expression, and the header terms it was made of, which match the
    /// messages whose text (and so whose header index row) is still to come by substring.
    Headers(Match, Expr),
    Tag(String),
}

impl Posting {
    /// The SELECT of its ids, as `id`.
    pub(super) fn push_select(&self, q: &mut Sql) {
        match self {
            Posting::Text(m) => m.push_select(q, "messages_fts", "message_words"),
            Posting::Headers(m, terms) => {
                m.push_select(q, "message_headers", "message_header_words");
                q.push(
                    " UNION ALL SELECT m.id AS id FROM messages m WHERE m.text_pending = 1 AND ",
                );
                push_expr(q, terms, Over::Pending);
            }
            Posting::Tag(t) => {
                q.push("SELECT message_id AS id FROM message_tags WHERE tag = ");
                q.push_bind(t.clone());
            }
        }
    }
}

/// The posting list of one term, if it has one.
fn term_posting(term: &Term) -> Option<Posting> {
    match term {
        Term::Tag(t) => Some(Posting::Tag(t.clone())),
        Term::Text(v) => Some(Posting::Text(Match::Phrase {
            value: v.clone(),
            column: None,
        })),
        _ => {
            let (column, value) = header_column(term)?;
            let phrase = Match::Phrase {
                value: value.to_string(),
                column: Some(column),
            };
            has_words(value).then(|| Posting::Headers(phrase, Expr::Term(term.clone())))
        }
    }
}

/// The expression as one posting list, when it is a term with an index of ids, or AND/OR of
/// terms of one full-text index (FTS5 joins them itself, without a second pass).
fn posting_of(expr: &Expr) -> Option<Posting> {
    match expr {
        Expr::Term(term) => term_posting(term),
        Expr::And(items) | Expr::Or(items) if !items.is_empty() => {
            let parts: Vec<Posting> = items.iter().map(posting_of).collect::<Option<_>>()?;
            let mut matches = Vec::with_capacity(parts.len());
            for part in &parts {
                match (&parts[0], part) {
                    (Posting::Text(_), Posting::Text(m))
                    | (Posting::Headers(..), Posting::Headers(m, _)) => matches.push(m.clone()),
                    // Different indexes (or tags): a set algebra, not one expression.
                    _ => return None,
                }
            }
            let joined = match expr {
                Expr::And(_) => Match::All(matches),
                _ => Match::Any(matches),
            };
            Some(match parts[0] {
                Posting::Text(_) => Posting::Text(joined),
                _ => Posting::Headers(joined, expr.clone()),
            })
        }
        _ => None,
    }
}

/// A query of several posting lists joined by AND, OR and negation, or one full-text
/// expression alone, as a set expression over those lists (`postings::matches` reads and
/// merges them); `None` for any other query. A full-text expression alone is read once as ids
/// here: counted by SQLite, its page evaluated it again (a phrase's positions twice; p95
/// in-process about 10 → 5.8 ms, BENCHMARKS.md). One header or tag list alone SQLite counts
/// from its index without that cost; PostgreSQL reads a header list's rows to count them, so
/// there it is read once too. A tag list alone either counts from its index.
pub(super) fn merged(query: &Query, backend: Backend) -> Option<(SetExpr, Vec<Posting>)> {
    match posting_of(&query.root) {
        Some(text @ Posting::Text(_)) => return Some((SetExpr::List(0), vec![text])),
        Some(headers @ Posting::Headers(..)) if backend == Backend::Postgres => {
            return Some((SetExpr::List(0), vec![headers]));
        }
        Some(_) => return None,
        None => {}
    }
    let mut lists = Vec::new();
    let expr = set_expr(&query.root, &mut lists)?;
    Some((expr, lists))
}

/// The set expression of `expr`, if every term has a posting list and every AND a positive
/// item to take the others from (`-tag:x` alone would need the set of all messages).
fn set_expr(expr: &Expr, lists: &mut Vec<Posting>) -> Option<SetExpr> {
    if let Some(posting) = posting_of(expr) {
        lists.push(posting);
        return Some(SetExpr::List(lists.len() - 1));
    }
    match expr {
        Expr::Or(items) if !items.is_empty() => Some(SetExpr::Any(
            items
                .iter()
                .map(|e| set_expr(e, lists))
                .collect::<Option<_>>()?,
        )),
        Expr::And(items) => {
            let (mut all, mut none) = (Vec::new(), Vec::new());
            for item in items {
                match item {
                    Expr::Not(inner) => none.push(set_expr(inner, lists)?),
                    other => all.push(set_expr(other, lists)?),
                }
            }
            (!all.is_empty()).then_some(SetExpr::All { all, none })
        }
        _ => None,
    }
}

/// Whether a term reads only a message's state row and mailbox.
fn on_state_alone(expr: &Expr) -> bool {
    let mut alone = true;
    expr.for_each_term(&mut |term| {
        alone &= matches!(
            term,
            Term::Read(_) | Term::Flagged(_) | Term::Mailbox(_) | Term::Account(_) | Term::Anywhere
        );
    });
    alone
}

/// `SELECT count(*) …` of the query's matches, reading as little as its terms allow: one
/// posting list alone; the state index; or messages. (Several posting lists are merged by
/// `postings`.)
pub(super) fn count_sql(query: &Query, mut q: Sql) -> Sql {
    q.push("SELECT count(*) FROM ");
    let root = &query.root;
    if let Some(posting) = posting_of(root) {
        q.push("(");
        posting.push_select(&mut q);
        q.push(") AS found");
        return q;
    }
    if on_state_alone(root) {
        q.push("message_state s WHERE ");
        push_expr(&mut q, root, Over::States);
        return q;
    }
    q.push(tables_for(root)).push(" WHERE ");
    push_expr(&mut q, root, Over::Messages);
    q
}

/// The ids of one page of matches, newest first. With few matches they are all read and
/// sorted; with many, the date index is walked from the newest message, each tested, until
/// the page is full: about `limit × all / matches` rows rather than every match.
pub(super) fn push_page_ids(q: &mut Sql, query: &Query, matches: u64, limit: u32, offset: u64) {
    push_page_from(q, matches, needs_state(&query.root));
    push_expr(q, &query.root, Over::Messages);
    push_page_end(q, limit, offset);
}

/// The ids of one page of known matches (sorted ids, as a JSON array), newest first.
pub(super) fn push_page_of_ids(q: &mut Sql, ids: String, matches: u64, limit: u32, offset: u64) {
    push_page_from(q, matches, false);
    q.push("m.id IN (SELECT CAST(value AS BIGINT) FROM json_each(")
        .push_bind(ids)
        .push("))");
    push_page_end(q, limit, offset);
}

/// The ids of one page of the messages holding the frequent word in `slot` (`frequent`),
/// newest first: the date index walked from the newest message, each message's bits read by
/// its id, about `limit × all / matches` of them.
pub(super) fn push_page_of_frequent(q: &mut Sql, slot: i64, limit: u32, offset: u64) {
    q.push(
        "SELECT m.id FROM messages m INDEXED BY messages_date \
         CROSS JOIN message_frequent_words f ON f.id = m.id WHERE (f.slots >> ",
    );
    q.push_bind(slot).push(") & 1 = 1");
    push_page_end(q, limit, offset);
}

/// `SELECT m.id FROM … WHERE ` of a page: its matches sorted when few, else the date index
/// walked from the newest message.
fn push_page_from(q: &mut Sql, matches: u64, state: bool) {
    q.push("SELECT m.id FROM messages m");
    if matches > SORTED_PAGE_UP_TO && q.backend() == Backend::Sqlite {
        q.push(" INDEXED BY messages_date");
    }
    if state {
        q.push(" JOIN message_state s ON s.id = m.id");
    }
    q.push(" WHERE ");
}

fn push_page_end(q: &mut Sql, limit: u32, offset: u64) {
    q.push(" ORDER BY m.date DESC, m.id DESC LIMIT ")
        .push_bind(i64::from(limit))
        .push(" OFFSET ")
        .push_bind(offset as i64);
}

fn needs_state(expr: &Expr) -> bool {
    let mut state = false;
    expr.for_each_term(&mut |term| state |= matches!(term, Term::Read(_) | Term::Flagged(_)));
    state
}

/// The tables a count over messages reads: `messages`, and the state row only when a term
/// asks for it. Leaving the join out never changes the matches: every message has exactly one
/// state row (written with it, in `insert_batch`).
fn tables_for(expr: &Expr) -> &'static str {
    match needs_state(expr) {
        false => "messages m",
        true => "messages m JOIN message_state s ON s.id = m.id",
    }
}

/// ` AND (the query's condition)`, for statements that read `m` (and `s`).
pub(super) fn push_terms(q: &mut Sql, query: &Query) {
    q.push(" AND ");
    push_expr(q, &query.root, Over::Messages);
}

/// The condition of `expr`, written over messages, state rows or messages awaiting their text
/// (`Over`).
fn push_expr(q: &mut Sql, expr: &Expr, over: Over) {
    let (items, joiner) = match expr {
        Expr::Term(term) => return push_term(q, term, over),
        Expr::Not(inner) => {
            q.push("NOT (");
            push_expr(q, inner, over);
            q.push(")");
            return;
        }
        Expr::And(items) if items.is_empty() => {
            q.push("1 = 1");
            return;
        }
        Expr::Or(items) if items.is_empty() => {
            q.push("1 = 0");
            return;
        }
        Expr::And(items) => (items, " AND "),
        Expr::Or(items) => (items, " OR "),
    };
    push_joined(q, items, joiner, over);
}

/// `items` joined as a balanced tree, `((a OR b) OR (c OR d))`: SQLite refuses an expression
/// more than 1,000 deep, which a flat chain of 1,000 terms is.
fn push_joined(q: &mut Sql, items: &[Expr], joiner: &str, over: Over) {
    if let [one] = items {
        return push_expr(q, one, over);
    }
    let (left, right) = items.split_at(items.len() / 2);
    q.push("(");
    push_joined(q, left, joiner, over);
    q.push(joiner);
    push_joined(q, right, joiner, over);
    q.push(")");
}

/// What a condition is written over: messages (`m`, with `s` joined when a term needs it),
/// state rows alone (`s`), or messages whose text is still to come, where header terms are
/// matched by substring because the header index does not hold them yet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Over {
    Messages,
    States,
    Pending,
}

impl Over {
    fn id(self) -> &'static str {
        match self {
            Over::States => "s.id",
            Over::Messages | Over::Pending => "m.id",
        }
    }

    /// The mailbox column: a state row carries its message's mailbox, so a count over state
    /// rows needs no message.
    fn mailbox(self) -> &'static str {
        match self {
            Over::States => "s.mailbox_id",
            Over::Messages | Over::Pending => "m.mailbox_id",
        }
    }
}

fn push_term(q: &mut Sql, term: &Term, over: Over) {
    let posting =
        term_posting(term).filter(|p| over != Over::Pending || !matches!(p, Posting::Headers(..)));
    if let Some(posting) = posting {
        q.push(over.id()).push(" IN (");
        posting.push_select(q);
        q.push(")");
        return;
    }
    // A header term over messages whose header index row is still to come, or a value of
    // punctuation alone.
    if let Some((column, value)) = header_column(term) {
        return push_like(q, &format!("m.{column}"), value);
    }
    match term {
        Term::From(_)
        | Term::To(_)
        | Term::Cc(_)
        | Term::Subject(_)
        | Term::Text(_)
        | Term::Tag(_) => {
            unreachable!("header terms are matched above, and every Text and Tag has a posting")
        }
        Term::Mailbox(v) => {
            q.push(over.mailbox())
                .push(" IN (SELECT id FROM mailboxes WHERE name = ");
            q.push_bind(v.clone()).push(" COLLATE NOCASE OR role = ");
            q.push_bind(v.to_ascii_lowercase()).push(")");
        }
        Term::Account(v) => {
            q.push(over.mailbox())
                .push(" IN (SELECT id FROM mailboxes WHERE account_id = ");
            q.push_bind(v.clone()).push(")");
        }
        Term::Read(r) => {
            q.push("s.is_read = ").push_bind(i64::from(*r));
        }
        Term::Flagged(f) => {
            q.push("s.is_flagged = ").push_bind(i64::from(*f));
        }
        // A message from no list has no list_id: `-list:x` must still match it.
        Term::List(Some(v)) => {
            q.push("(m.list_id IS NOT NULL AND ");
            push_like(q, "m.list_id", v);
            q.push(")");
        }
        Term::Thread(v) => {
            q.push("m.thread_id = ").push_bind(v.to_ascii_lowercase());
        }
        // No verdict, or one not read (an index from before `auth`), is `none`.
        Term::Auth(v) if v == "none" => {
            q.push("(m.auth IS NULL OR m.auth = 'none')");
        }
        // NOT of a comparison with NULL is NULL: `-auth:fail` must still match no verdict.
        Term::Auth(v) => {
            q.push("(m.auth IS NOT NULL AND m.auth = ")
                .push_bind(v.clone())
                .push(")");
        }
        Term::List(None) => {
            q.push("m.list_id IS NOT NULL");
        }
        Term::HasAttachment => {
            q.push("m.has_attachments = 1");
        }
        Term::Before(t) => {
            q.push("m.date < ").push_bind(*t);
        }
        Term::After(t) => {
            q.push("m.date >= ").push_bind(*t);
        }
        Term::Larger(n) => {
            q.push("m.size > ").push_bind(*n as i64);
        }
        Term::Smaller(n) => {
            q.push("m.size < ").push_bind(*n as i64);
        }
        Term::Anywhere => {
            q.push("1 = 1");
        }
    }
}
