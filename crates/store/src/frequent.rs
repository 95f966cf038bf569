//! The words many messages hold, counted as they are written: a search for one of them alone
//! takes its count from `frequent_words` instead of reading every id it matches (FTS5 keeps
//! no count of the rows a word is in), and its page from the date index, each message's bits
//! telling whether it holds the word (BENCHMARKS.md, "At a million messages"). SQLite's
//! alone; PostgreSQL counts a word from its own index.
//!
//! Architecture Invariant: for each chosen word, `frequent_words.messages` is the number of
//! `messages_fts` rows holding it, and a message's bit for it in `message_frequent_words` is
//! set exactly when its row holds it, at every commit. Every statement that writes
//! `messages_fts` rows is followed, in its transaction, by `recount` of those rows; a row
//! removed with its message is taken off by a trigger (migration `0043`).

use std::collections::HashMap;

use mailbroker_core::Error;
use mailbroker_query::{Expr, Query, Term};
use sqlx::AnyConnection;

use super::messages::json_ids;
use super::postings::ids_of;
use super::sql::Sql;
use super::{Backend, MMAP_SIZE, ROWS_PER_STATEMENT, Store, db_error};

/// Words chosen at most: one bit each in a message's 64-bit row, the sign bit left alone.
const MOST: usize = 63;

/// The fewest messages a word is in to be chosen: a word in fewer is read in about a
/// millisecond.
const FREQUENT_FROM: i64 = 20_000;

/// The fewest messages an index holds for words to be chosen in it: choosing walks the whole
/// index and marks every message (6 s at a million messages, 0.8 s at 100,000, a sixth of
/// that first sync), and in a smaller index the commonest word is read in a few milliseconds.
const CHOOSE_FROM: i64 = 200_000;

/// Written rows further apart than this are recounted by separate ranges of the index.
const RUN_GAP: i64 = 1_000;

/// Ranges recounted at most one by one; rows scattered wider are recounted over their whole
/// span, each word's list read once.
const MOST_RUNS: usize = 64;

/// A frequent word a query is, alone: its slot and how many messages hold it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frequent {
    pub slot: i64,
    pub messages: u64,
}

impl Store {
    /// The frequent word `query` is, if it is one word alone that was chosen. Only a word of
    /// ASCII letters and digits is looked up: lowercased, it is the word FTS5's tokenizer
    /// makes of it; any other is read from the index.
    pub(super) async fn frequent(&self, query: &Query) -> Result<Option<Frequent>, Error> {
        let Expr::Term(Term::Text(value)) = &query.root else {
            return Ok(None);
        };
        let word = value.to_ascii_lowercase();
        if self.backend() != Backend::Sqlite
            || word.is_empty()
            || !word.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Ok(None);
        }
        let found: Option<(i64, i64)> =
            sqlx::query_as("SELECT slot, messages FROM frequent_words WHERE word = $1")
                .bind(word)
                .fetch_optional(self.pool())
                .await
                .map_err(db_error)?;
        Ok(found.map(|(slot, messages)| Frequent {
            slot,
            messages: messages.max(0) as u64,
        }))
    }

    /// Chooses the frequent words again once the messages that arrived since they were last
    /// chosen (`arrived` by the sync that just ended, and those before) are a quarter of the
    /// index then, or when they never were and it holds `CHOOSE_FROM` messages: as a first
    /// sync ends, say, or the first sync after an upgrade. Otherwise it only adds `arrived`
    /// up: counting a million messages at every sync's end took 0.1 s.
    pub async fn refresh_frequent_words(&self, arrived: usize) -> Result<(), Error> {
        if self.backend() != Backend::Sqlite {
            return Ok(());
        }
        let chosen: Option<(i64, i64)> =
            sqlx::query_as("SELECT messages, arrived FROM frequent_words_chosen")
                .fetch_optional(self.pool())
                .await
                .map_err(db_error)?;
        let due = match chosen {
            Some((then, since)) => {
                let since = since + arrived as i64;
                since >= then / 4 && then + since >= CHOOSE_FROM
            }
            None => {
                let now: i64 = sqlx::query_scalar("SELECT count(*) FROM messages")
                    .fetch_one(self.pool())
                    .await
                    .map_err(db_error)?;
                now >= CHOOSE_FROM
            }
        };
        if due {
            self.choose_frequent_words(FREQUENT_FROM).await?;
        } else if chosen.is_some() {
            sqlx::query("UPDATE frequent_words_chosen SET arrived = arrived + $1")
                .bind(arrived as i64)
                .execute(self.pool())
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }

    /// Chooses the frequent words afresh: the most common of those in at least `from`
    /// messages, each counted and marked in every message holding it, in one transaction.
    /// Returns how many were chosen.
    pub async fn choose_frequent_words(&self, from: i64) -> Result<usize, Error> {
        if self.backend() != Backend::Sqlite {
            return Ok(0);
        }
        let mut tx = self.write_tx().await?;
        // Choosing walks the whole full-text index once: read through the connection's own
        // cache, its pages are not mapped into the process (360 MB more resident at a million
        // messages), and the walk is no slower.
        let mapped = sqlx::query("PRAGMA mmap_size = 0")
            .execute(&mut *tx)
            .await
            .map_err(db_error);
        let chosen = match mapped {
            Ok(_) => choose(&mut tx, from).await,
            Err(e) => Err(e),
        };
        let unmapped = sqlx::query(MMAP_SIZE)
            .execute(&mut *tx)
            .await
            .map_err(db_error);
        let chosen = chosen?;
        unmapped?;
        tx.commit().await.map_err(db_error)?;
        Ok(chosen)
    }
}

/// The frequent words chosen afresh in `conn`'s transaction (`Store::choose_frequent_words`).
async fn choose(conn: &mut AnyConnection, from: i64) -> Result<usize, Error> {
    // The vocabulary's counts may include rows removed since the index last merged; each
    // word is counted below from its list, which leaves them out.
    let words: Vec<String> = sqlx::query_scalar(
        "SELECT term FROM messages_fts_words WHERE doc >= $1 AND term NOT GLOB '*[^a-z0-9]*'
         ORDER BY doc DESC, term LIMIT $2",
    )
    .bind(from)
    .bind(MOST as i64)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?;
    sqlx::raw_sql(
        "DELETE FROM frequent_words; DELETE FROM message_frequent_words;
         DELETE FROM frequent_words_chosen;
         INSERT INTO frequent_words_chosen (messages) SELECT count(*) FROM messages;",
    )
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    let mut slots: HashMap<i64, i64> = HashMap::new();
    for (slot, word) in words.iter().enumerate() {
        let text: Option<String> = sqlx::query_scalar(
            "SELECT group_concat(rowid) FROM messages_fts WHERE messages_fts MATCH $1",
        )
        .bind(format!("\"{word}\""))
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
        let ids = ids_of(text.as_deref().unwrap_or_default())?;
        for id in &ids {
            *slots.entry(*id).or_default() |= 1 << slot;
        }
        sqlx::query("INSERT INTO frequent_words (slot, word, messages) VALUES ($1, $2, $3)")
            .bind(slot as i64)
            .bind(word.as_str())
            .bind(ids.len() as i64)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
    }
    let mut rows: Vec<(i64, i64)> = slots.into_iter().collect();
    rows.sort_unstable();
    write_slots(conn, &rows).await?;
    Ok(words.len())
}

/// Recounts the frequent words over the messages `ids`, whose full-text rows were just
/// written (added, or replaced) in the transaction `conn` is in: their bits as the index now
/// holds them, and each word's count by what changed.
pub(super) async fn recount(conn: &mut AnyConnection, ids: &[i64]) -> Result<(), Error> {
    if ids.is_empty() || Backend::of(conn) != Backend::Sqlite || !any_chosen(conn).await? {
        return Ok(());
    }
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let list = json_ids(&ids)?;
    let before: HashMap<i64, i64> = sqlx::query_as(
        "SELECT id, slots FROM message_frequent_words
         WHERE id IN (SELECT value FROM json_each($1))",
    )
    .bind(list)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_error)?
    .into_iter()
    .collect();
    let mut after: HashMap<i64, i64> = ids.iter().map(|&id| (id, 0)).collect();
    for (first, last) in ranges(&ids) {
        let held: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT w.slot, f.rowid FROM frequent_words w, messages_fts f
             WHERE f.messages_fts MATCH '\"' || w.word || '\"' AND f.rowid BETWEEN $1 AND $2",
        )
        .bind(first)
        .bind(last)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?;
        for (slot, id) in held {
            if let Some(slots) = after.get_mut(&id) {
                *slots |= 1 << slot;
            }
        }
    }
    let mut changed = Vec::new();
    let mut counts = [0i64; MOST];
    for &id in &ids {
        let (was, now) = (before.get(&id).copied().unwrap_or(0), after[&id]);
        if was == now {
            continue;
        }
        for (slot, count) in counts.iter_mut().enumerate() {
            *count += (now >> slot & 1) - (was >> slot & 1);
        }
        changed.push((id, now));
    }
    write_slots(conn, &changed).await?;
    for (slot, count) in counts.iter().enumerate().filter(|(_, c)| **c != 0) {
        sqlx::query("UPDATE frequent_words SET messages = messages + $1 WHERE slot = $2")
            .bind(*count)
            .bind(slot as i64)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
    }
    Ok(())
}

/// Whether any word is chosen, so writes of the full-text index have words to recount.
pub(super) async fn any_chosen(conn: &mut AnyConnection) -> Result<bool, Error> {
    let any: i64 = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM frequent_words)")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_error)?;
    Ok(any == 1)
}

/// The ranges of the index to read for the sorted `ids`: runs of near ids, or, when they
/// are scattered, their whole span.
fn ranges(ids: &[i64]) -> Vec<(i64, i64)> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if id - *last <= RUN_GAP => *last = id,
            _ => runs.push((id, id)),
        }
    }
    match (runs.len() > MOST_RUNS, ids.first(), ids.last()) {
        (true, Some(&first), Some(&last)) => vec![(first, last)],
        _ => runs,
    }
}

/// Each message's bits as given: a row for those holding any frequent word, none for the
/// others.
async fn write_slots(conn: &mut AnyConnection, rows: &[(i64, i64)]) -> Result<(), Error> {
    let (held, none): (Vec<_>, Vec<_>) = rows.iter().partition(|(_, slots)| *slots != 0);
    if !none.is_empty() {
        let ids: Vec<i64> = none.iter().map(|(id, _)| *id).collect();
        let list = json_ids(&ids)?;
        sqlx::query(
            "DELETE FROM message_frequent_words WHERE id IN (SELECT value FROM json_each($1))",
        )
        .bind(list)
        .execute(&mut *conn)
        .await
        .map_err(db_error)?;
    }
    for chunk in held.chunks(ROWS_PER_STATEMENT) {
        let mut q = Sql::new(
            Backend::Sqlite,
            "INSERT OR REPLACE INTO message_frequent_words (id, slots) ",
        );
        q.push_values(chunk, |mut row, (id, slots)| {
            row.push_bind(*id).push_bind(*slots);
        });
        q.build().execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::StoreSink;
    use mailbroker_core::{
        AccountId, MailboxInfo, MessageMeta, MessageText, RemoteId, Seen, SyncSink,
    };

    fn inbox() -> MailboxInfo {
        MailboxInfo {
            name: "INBOX".into(),
            role: None,
            role_source: None,
            delimiter: None,
            selectable: true,
            remote: None,
        }
    }

    /// Message `n`, dated by its number, with `body` as its indexed text (or none yet).
    fn message(n: i64, body: Option<&str>) -> MessageMeta {
        MessageMeta {
            id: RemoteId::new(n.to_string()),
            subject: format!("message {n}"),
            date: Some(1_700_000_000 + n * 60),
            body_prefix: body.unwrap_or_default().to_string(),
            text_pending: body.is_none(),
            ..MessageMeta::default()
        }
    }

    fn text(n: i64, body: &str) -> MessageText {
        MessageText {
            id: RemoteId::new(n.to_string()),
            body_prefix: body.to_string(),
            ..MessageText::default()
        }
    }

    /// The words a message's body holds: every one `budget`, every second `report`, every
    /// third `Café` (indexed as `cafe`); every subject holds `message`.
    fn body(n: i64) -> String {
        let mut words = vec!["budget"];
        if n % 2 == 0 {
            words.push("report");
        }
        if n % 3 == 0 {
            words.push("Café");
        }
        words.join(" ")
    }

    async fn apply(store: &Store, seen: Vec<Seen>) {
        let mut sink = StoreSink::new(store.clone(), "a".parse::<AccountId>().unwrap());
        sink.apply(Seen::Mailboxes(vec![inbox()])).await.unwrap();
        for event in seen {
            sink.apply(event).await.unwrap();
        }
        sink.finish().await.unwrap();
    }

    /// Each chosen word's count is the index's own, each message's bits are the words its row
    /// holds, and a search for the word alone shows the index's newest matches and total.
    async fn assert_true_to_the_index(store: &Store) {
        let words: Vec<(i64, String, i64)> =
            sqlx::query_as("SELECT slot, word, messages FROM frequent_words ORDER BY slot")
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert!(!words.is_empty(), "no word chosen");
        for (slot, word, messages) in words {
            let phrase = format!("\"{word}\"");
            let holding: Vec<i64> = sqlx::query_scalar(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH $1 ORDER BY rowid",
            )
            .bind(&phrase)
            .fetch_all(store.pool())
            .await
            .unwrap();
            assert_eq!(messages, holding.len() as i64, "{word}'s count");
            let marked: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM message_frequent_words WHERE (slots >> $1) & 1 = 1 ORDER BY id",
            )
            .bind(slot)
            .fetch_all(store.pool())
            .await
            .unwrap();
            assert_eq!(marked, holding, "{word}'s bits");
            let newest: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM messages WHERE id IN (SELECT rowid FROM messages_fts
                 WHERE messages_fts MATCH $1) ORDER BY date DESC, id DESC LIMIT 5 OFFSET 2",
            )
            .bind(&phrase)
            .fetch_all(store.pool())
            .await
            .unwrap();
            let query = mailbroker_query::parse(&word.to_uppercase(), 0).unwrap();
            assert!(store.frequent(&query).await.unwrap().is_some(), "{word}");
            let page = store.search_page(&query, 5, 2).await.unwrap();
            let shown: Vec<i64> = page.rows.iter().map(|r| r.place.id).collect();
            assert_eq!((shown, page.total), (newest, messages as u64), "{word}");
        }
    }

    #[tokio::test]
    async fn counts_and_bits_follow_every_write_of_the_full_text_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("index.db")).await.unwrap();
        sqlx::query(
            "INSERT INTO accounts (id, provider, settings, capabilities, created_at) \
             VALUES ('a', 'imap', '{}', $1, 0)",
        )
        .bind(serde_json::to_string(&mailbroker_core::Capabilities::default()).unwrap())
        .execute(store.pool())
        .await
        .unwrap();
        let mailbox = || "INBOX".to_string();
        // Forty with their text, twenty whose text comes in a second pass.
        let mut first: Vec<MessageMeta> = (1..=40).map(|n| message(n, Some(&body(n)))).collect();
        first.extend((41..=60).map(|n| message(n, None)));
        let texts = (41..=60).map(|n| text(n, &body(n))).collect();
        apply(
            &store,
            vec![
                Seen::Arrived {
                    mailbox: mailbox(),
                    messages: first,
                },
                Seen::TextFilled {
                    mailbox: mailbox(),
                    texts,
                },
            ],
        )
        .await;
        assert_eq!(store.choose_frequent_words(20).await.unwrap(), 4);
        assert_true_to_the_index(&store).await;
        // Arrivals with their text and without; a second pass; a message whose text changed
        // (its row replaced); messages gone; a second pass over scattered messages.
        let mut next: Vec<MessageMeta> = (61..=70).map(|n| message(n, Some(&body(n)))).collect();
        next.extend((71..=75).map(|n| message(n, None)));
        next.push(message(2, Some("nothing frequent")));
        next.push(message(3, Some("report only")));
        apply(
            &store,
            vec![
                Seen::Arrived {
                    mailbox: mailbox(),
                    messages: next,
                },
                Seen::TextFilled {
                    mailbox: mailbox(),
                    texts: (71..=75).map(|n| text(n, "report")).collect(),
                },
                Seen::Gone {
                    mailbox: mailbox(),
                    ids: [4, 9, 64].map(|n| RemoteId::new(n.to_string())).to_vec(),
                },
                Seen::TextFilled {
                    mailbox: mailbox(),
                    texts: vec![text(10, "budget"), text(7000, "budget"), text(50, "")],
                },
            ],
        )
        .await;
        assert_true_to_the_index(&store).await;
        // Chosen again, the same; then the account and everything in it removed.
        store.choose_frequent_words(20).await.unwrap();
        assert_true_to_the_index(&store).await;
        store
            .remove_account(&"a".parse::<AccountId>().unwrap())
            .await
            .unwrap();
        let left: Vec<(String, i64)> = sqlx::query_as("SELECT word, messages FROM frequent_words")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert!(left.iter().all(|(_, n)| *n == 0), "{left:?}");
        let marked: i64 = sqlx::query_scalar("SELECT count(*) FROM message_frequent_words")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(marked, 0);
    }

    #[tokio::test]
    async fn only_a_word_of_letters_and_digits_alone_is_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("index.db")).await.unwrap();
        sqlx::raw_sql("INSERT INTO frequent_words (slot, word, messages) VALUES (0, 'budget', 7)")
            .execute(store.pool())
            .await
            .unwrap();
        let looked_up = |text: &'static str| {
            let store = store.clone();
            async move {
                let query = mailbroker_query::parse(text, 0).unwrap();
                store.frequent(&query).await.unwrap().map(|f| f.messages)
            }
        };
        assert_eq!(looked_up("Budget").await, Some(7));
        assert_eq!(looked_up("\"budget\"").await, Some(7));
        for other in [
            "budget report",
            "budge",
            "budget*",
            "-budget",
            "subject:budget",
            "b-udget",
        ] {
            assert_eq!(looked_up(other).await, None, "{other}");
        }
    }

    /// Words are chosen once the index holds `CHOOSE_FROM` messages, then again only once
    /// the messages arrived since, over one sync or several, are a quarter of it.
    #[tokio::test]
    async fn words_are_chosen_again_once_the_index_grew_by_a_quarter() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("index.db")).await.unwrap();
        let n = CHOOSE_FROM;
        crate::test_messages(&store, n as usize - 1).await;
        sqlx::raw_sql(
            "INSERT INTO messages_fts (rowid, subject, addresses, snippet, body)
             SELECT id, 'budget', '', '', '' FROM messages",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let grow_to = |to: i64| {
            let store = store.clone();
            async move {
                let before: i64 = sqlx::query_scalar("SELECT count(*) FROM messages")
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
                // Written here, not by a sync: none is counted as it arrives.
                sqlx::query(
                    "WITH RECURSIVE n(i) AS (SELECT (SELECT max(id) + 1 FROM messages) UNION ALL
                       SELECT i + 1 FROM n WHERE i < $1)
                     INSERT INTO messages (id, mailbox_id, remote_id)
                     SELECT i, 1, CAST(i AS TEXT) FROM n",
                )
                .bind(to)
                .execute(store.pool())
                .await
                .unwrap();
                sqlx::query(
                    "INSERT INTO messages_fts (rowid, subject, addresses, snippet, body)
                     SELECT id, 'budget', '', '', '' FROM messages WHERE id > $1",
                )
                .bind(before)
                .execute(store.pool())
                .await
                .unwrap();
                store
                    .refresh_frequent_words((to - before) as usize)
                    .await
                    .unwrap();
                sqlx::query_as::<_, (i64, i64)>(
                    "SELECT (SELECT messages FROM frequent_words_chosen),
                       coalesce((SELECT messages FROM frequent_words WHERE word = 'budget'), 0)",
                )
                .fetch_optional(store.pool())
                .await
                .unwrap()
            }
        };
        store.refresh_frequent_words(n as usize - 1).await.unwrap();
        let never: Option<i64> = sqlx::query_scalar("SELECT messages FROM frequent_words_chosen")
            .fetch_optional(store.pool())
            .await
            .unwrap();
        assert_eq!(never, None, "chosen below {n} messages");
        assert_eq!(grow_to(n).await, Some((n, n)));
        // Not chosen again until a quarter more.
        assert_eq!(grow_to(n + n / 4 - 1).await, Some((n, n)));
        assert_eq!(grow_to(n + n / 4).await, Some((n + n / 4, n + n / 4)));
    }

    #[test]
    fn scattered_rows_are_read_over_their_span() {
        assert_eq!(ranges(&[1, 2, 900, 5000]), vec![(1, 900), (5000, 5000)]);
        let scattered: Vec<i64> = (0..=MOST_RUNS as i64).map(|i| i * 10_000).collect();
        assert_eq!(ranges(&scattered), vec![(0, MOST_RUNS as i64 * 10_000)]);
    }
}
