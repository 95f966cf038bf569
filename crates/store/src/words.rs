//! Full text on PostgreSQL: what SQLite's FTS5 tables do there (`messages_fts`,
//! `message_headers`), as `tsvector`s the store writes itself.
//!
//! Architecture Invariant: both engines see the same words. Text is cut into words by FTS5's
//! own tokenizer (`unicode61 remove_diacritics 2`, in a private in-memory SQLite), for
//! documents and queries alike, and handed to PostgreSQL as `tsvector` and `tsquery` values
//! written out in full (lexemes and positions), which PostgreSQL takes as they are: its own
//! parser, which would keep `alice@example.test` whole and split words where its locale says,
//! is never asked. A query then means the same on both engines, down to which characters
//! join a word.

use std::collections::HashMap;
use std::sync::Arc;

use mailbroker_core::Error;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Mutex, OnceCell};

use super::sql::Sql;
use super::{Backend, db_error};
use mailbroker_query::{Query, Term};

/// The header fields, told apart in one `tsvector` by a tag before each lexeme, as FTS5's
/// column filters tell them apart in `message_headers`. Not by weight: PostgreSQL's GIN index
/// keeps no weights, so a weighted term read back every row holding the word, where a tagged
/// one is answered by the index alone (BENCHMARKS.md, "The index on PostgreSQL").
/// FTS5's tokenizer never leaves a `:` in a word, so a tag cannot be forged by a header.
const FIELDS: [(&str, &str); 4] = [
    ("from_addr", "f:"),
    ("to_addr", "t:"),
    ("cc_addr", "c:"),
    ("subject", "s:"),
];

/// PostgreSQL keeps lexemes of up to 2,046 bytes and 256 positions of each; positions above
/// 16,383 are all 16,383.
const MAX_LEXEME: usize = 2046;
const MAX_POSITIONS: usize = 256;
const MAX_POSITION: usize = 16_383;

/// FTS5's tokenizer, reached through an in-memory SQLite that only ever holds the text being
/// cut. One connection for the process: cutting takes microseconds a text.
static TOKENIZER: OnceCell<Mutex<SqliteConnection>> = OnceCell::const_new();

async fn tokenizer() -> Result<&'static Mutex<SqliteConnection>, Error> {
    TOKENIZER
        .get_or_try_init(|| async {
            let mut conn = SqliteConnection::connect("sqlite::memory:")
                .await
                .map_err(db_error)?;
            sqlx::raw_sql(
                "CREATE VIRTUAL TABLE cut USING fts5(text,
                     tokenize = 'unicode61 remove_diacritics 2');
                 CREATE VIRTUAL TABLE cut_words USING fts5vocab(cut, instance);",
            )
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
            Ok(Mutex::new(conn))
        })
        .await
}

/// Each text's words, in order, as FTS5 indexes them (lowercase, diacritics removed).
pub(super) async fn cut(texts: &[&str]) -> Result<Vec<Vec<String>>, Error> {
    let mut out = vec![Vec::new(); texts.len()];
    if texts.iter().all(|t| t.is_empty()) {
        return Ok(out);
    }
    let mut conn = tokenizer().await?.lock().await;
    let mut tx = conn.begin().await.map_err(db_error)?;
    let numbered: Vec<(i64, &str)> = (0..).zip(texts.iter().copied()).collect();
    for chunk in numbered.chunks(super::ROWS_PER_STATEMENT) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new("INSERT INTO cut (rowid, text) ");
        insert.push_values(chunk, |mut row, &(i, text)| {
            row.push_bind(i).push_bind(text);
        });
        insert.build().execute(&mut *tx).await.map_err(db_error)?;
    }
    // A row a distinct word, with where it stands ("doc offset doc offset ..."): the index's
    // own order, with no sort, and a few thousand rows instead of one a word of every text
    // (each row crossed threads, which made the text pass of a first sync client-bound).
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT term, group_concat(doc || ' ' || offset, ' ') FROM cut_words GROUP BY term",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    // Nothing is kept: the next text starts from an empty table.
    tx.rollback().await.map_err(db_error)?;
    let mut placed: Vec<Vec<(usize, usize)>> = vec![Vec::new(); texts.len()];
    for (word, (_, at)) in rows.iter().enumerate() {
        let mut numbers = at.split(' ').map(str::parse::<usize>);
        while let (Some(doc), Some(offset)) = (numbers.next(), numbers.next()) {
            let (Ok(doc), Ok(offset)) = (doc, offset) else {
                return Err(Error::internal(
                    "the word index gave a position that is no number",
                ));
            };
            if let Some(words) = placed.get_mut(doc) {
                words.push((offset, word));
            }
        }
    }
    for (words, placed) in out.iter_mut().zip(&mut placed) {
        placed.sort_unstable();
        words.extend(placed.iter().map(|(_, word)| rows[*word].0.clone()));
    }
    Ok(out)
}

/// A lexeme as `tsvector` and `tsquery` input take it: quoted, quotes and backslashes
/// escaped.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''"))
}

/// A `tsvector` of several parts (fields or columns), each part's words numbered on from the
/// last part's with one position left out between them, so a phrase never spans two parts,
/// as an FTS5 phrase never spans two columns. Each part's lexemes carry its tag, if any.
fn tsvector(parts: &[(&[String], &str)]) -> String {
    let mut positions: HashMap<String, Vec<String>> = HashMap::new();
    let mut next = 1;
    for (words, tag) in parts {
        for word in words.iter() {
            let lexeme = format!("{tag}{word}");
            if lexeme.len() <= MAX_LEXEME {
                let at = positions.entry(lexeme).or_default();
                if at.len() < MAX_POSITIONS {
                    at.push(next.min(MAX_POSITION).to_string());
                }
            }
            next += 1;
        }
        next += 1;
    }
    let mut out: Vec<String> = positions
        .into_iter()
        .map(|(word, at)| format!("{}:{}", quoted(&word), at.join(",")))
        .collect();
    out.sort();
    out.join(" ")
}

/// What one message's full-text rows are made of.
pub(super) struct Document<'a> {
    pub id: i64,
    pub subject: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    pub cc: &'a str,
    /// The snippet, left out where the body starts with it (as FTS5's row leaves it out).
    pub snippet: &'a str,
    pub body: &'a str,
}

/// One message's full-text rows as PostgreSQL takes them: its words (subject, addresses,
/// snippet, body: `messages_fts`'s columns), and its header fields' words.
pub(super) struct Words {
    pub id: i64,
    /// Its `words` in each of `TABLES`.
    words: [String; 2],
}

/// The tables of a message's full-text rows.
const TABLES: [&str; 2] = ["message_words", "message_header_words"];

/// The full-text rows of complete messages.
pub(super) async fn rows(documents: &[Document<'_>]) -> Result<Vec<Words>, Error> {
    let mut texts = Vec::with_capacity(documents.len() * 6);
    for d in documents {
        let snippet = match d.body.starts_with(d.snippet) {
            true => "",
            false => d.snippet,
        };
        texts.extend([d.from, d.to, d.cc, d.subject, snippet, d.body]);
    }
    let cut = cut(&texts).await?;
    let rows = documents.iter().zip(cut.chunks(6)).map(|(d, w)| {
        let addresses: Vec<String> = w[..3].concat();
        let fields: Vec<(&[String], &str)> = FIELDS
            .iter()
            .zip(&w[..4])
            .map(|((_, tag), words)| (words.as_slice(), *tag))
            .collect();
        Words {
            id: d.id,
            words: [
                tsvector(&[(&w[3], ""), (&addresses, ""), (&w[4], ""), (&w[5], "")]),
                tsvector(&fields),
            ],
        }
    });
    Ok(rows.collect())
}

/// Writes (or rewrites) full-text rows.
pub(super) async fn insert(
    conn: &mut sqlx::AnyConnection,
    mut rows: Vec<Words>,
) -> Result<(), Error> {
    if rows.is_empty() {
        return Ok(());
    }
    for (at, table) in TABLES.iter().enumerate() {
        let mut q = Sql::new(
            Backend::Postgres,
            format!("INSERT INTO {table} (id, words) VALUES "),
        );
        for (i, row) in rows.iter_mut().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(")
                .push_bind(row.id)
                .push(", CAST(")
                .push_bind(std::mem::take(&mut row.words[at]))
                .push(" AS tsvector))");
        }
        q.push(" ON CONFLICT (id) DO UPDATE SET words = excluded.words");
        q.build().execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
}

/// Writes (or rewrites) the full-text rows of complete messages.
pub(super) async fn write(
    conn: &mut sqlx::AnyConnection,
    documents: &[Document<'_>],
) -> Result<(), Error> {
    insert(conn, rows(documents).await?).await
}

/// The words of every phrase a query holds (word terms and header terms), cut once before
/// its statements are written.
#[derive(Debug, Default)]
pub(crate) struct Lexicon(HashMap<String, Vec<String>>);

impl Lexicon {
    pub(super) async fn of(query: &Query) -> Result<Arc<Lexicon>, Error> {
        let mut values: Vec<String> = Vec::new();
        query.root.for_each_term(&mut |term| match term {
            Term::Text(v) | Term::From(v) | Term::To(v) | Term::Cc(v) | Term::Subject(v) => {
                values.push(v.clone())
            }
            _ => {}
        });
        values.sort_unstable();
        values.dedup();
        let texts: Vec<&str> = values.iter().map(String::as_str).collect();
        let cut = cut(&texts).await?;
        let words = values.into_iter().zip(cut).collect();
        Ok(Arc::new(Lexicon(words)))
    }

    /// A `tsquery` matching `value`'s words in order, in header field `column` when one is
    /// given (its last word also as the start of a word, as FTS5's `*`, when the value ends
    /// in a letter or digit: `search::last_word_open`). `None` when the
    /// value has no word PostgreSQL could hold: FTS5 finds nothing for it either.
    pub(super) fn tsquery(&self, value: &str, column: Option<&str>) -> Option<String> {
        let words = self.0.get(value)?;
        let tag = column
            .and_then(|c| FIELDS.iter().find(|(f, _)| *f == c))
            .map_or("", |(_, tag)| tag);
        if words.is_empty() || words.iter().any(|w| tag.len() + w.len() > MAX_LEXEME) {
            return None;
        }
        let last = words.len() - 1;
        let open = column.is_some() && mailbroker_query::last_word_open(value);
        let lexemes: Vec<String> = words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let star = if open && i == last { ":*" } else { "" };
                format!("{}{star}", quoted(&format!("{tag}{w}")))
            })
            .collect();
        Some(lexemes.join(" <-> "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn words_are_cut_by_fts5() {
        let cut = cut(&["Alice Example <alice@Example.test>, Café", "", "don't"])
            .await
            .unwrap();
        assert_eq!(
            cut,
            vec![
                vec!["alice", "example", "alice", "example", "test", "cafe"],
                vec![],
                vec!["don", "t"],
            ]
        );
    }

    #[test]
    fn parts_are_numbered_apart_and_tagged() {
        let a = vec!["x".to_string(), "y".to_string()];
        let b = vec!["y".to_string(), "it's".to_string()];
        assert_eq!(
            tsvector(&[(&a, "f:"), (&b, "s:")]),
            "'f:x':1 'f:y':2 's:it''s':5 's:y':4"
        );
        assert_eq!(tsvector(&[(&a, ""), (&b, "")]), "'it''s':5 'x':1 'y':2,4");
    }

    #[tokio::test]
    async fn a_query_is_words_in_order_and_only_words() {
        let query = mailbroker_query::parse(
            "from:alice@example.te from:sender5@ \"Quarterly report\" x'|!y",
            0,
        )
        .unwrap();
        let lexicon = Lexicon::of(&query).await.unwrap();
        assert_eq!(
            lexicon
                .tsquery("alice@example.te", Some("from_addr"))
                .as_deref(),
            Some("'f:alice' <-> 'f:example' <-> 'f:te':*")
        );
        assert_eq!(
            lexicon.tsquery("sender5@", Some("from_addr")).as_deref(),
            Some("'f:sender5'")
        );
        assert_eq!(
            lexicon.tsquery("Quarterly report", None).as_deref(),
            Some("'quarterly' <-> 'report'")
        );
        assert_eq!(lexicon.tsquery("never cut", None), None);
    }
}
