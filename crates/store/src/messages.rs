//! Reading messages back: lookup by id and search by query terms.

use mailbroker_core::{AccountId, Error, RemoteId, Version};

use super::sql::Sql;

use super::frequent::Frequent;
use super::query::{
    SORTED_PAGE_UP_TO, count_sql, merged, push_page_ids, push_page_of_frequent, push_page_of_ids,
    push_terms,
};
use std::sync::Arc;

use super::words::Lexicon;
use super::{Backend, Store, db_error, postings};
use mailbroker_query::Query;

/// A page of search results and how many messages match in all.
#[derive(Debug)]
pub struct SearchPage {
    pub rows: Vec<MessageRow>,
    pub total: u64,
}

/// What a query found before its page is read.
enum Found {
    Counted(u64),
    /// The matches, sorted, when the count merged posting lists to find them.
    Ids(Vec<i64>),
    /// One frequent word alone: counted as the index was written, its matches never read.
    Frequent(Frequent),
}

impl Found {
    fn count(&self) -> u64 {
        match self {
            Found::Counted(n) => *n,
            Found::Ids(ids) => ids.len() as u64,
            Found::Frequent(word) => word.messages,
        }
    }
}

/// One indexed message as the CLI and MCP show it: where it is and its state, then headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub place: MessageRef,
    pub message_id: Option<String>,
    pub from: String,
    pub to: String,
    pub cc: String,
    pub subject: String,
    /// RFC 3339, UTC.
    pub date: Option<String>,
    pub size: u64,
    pub has_attachments: bool,
    /// The provider's raw flag values (IMAP system flags and keywords).
    pub flags: Vec<String>,
    pub snippet: String,
    /// The mailing list it came from (`list:`).
    pub list: Option<String>,
    /// Its conversation (`thread:`), and how many indexed messages it has.
    pub thread: Option<String>,
    pub thread_messages: u64,
}

#[derive(sqlx::FromRow)]
struct Row {
    #[sqlx(flatten)]
    place: PlaceRow,
    message_id: Option<String>,
    from_addr: String,
    to_addr: String,
    cc_addr: String,
    subject: String,
    date: Option<i64>,
    size: i64,
    #[sqlx(try_from = "crate::sql::Bit")]
    has_attachments: bool,
    flags: String,
    snippet: String,
    list_id: Option<String>,
    thread_id: Option<String>,
    thread_messages: i64,
}

const SELECT: &str = "SELECT m.id, b.account_id, b.name, m.remote_id, s.version,
    m.message_id,
    m.from_addr, m.to_addr, m.cc_addr, m.subject, m.date, m.size, m.has_attachments, s.is_read,
    s.is_flagged, s.flags, s.tags, coalesce(t.snippet, '') AS snippet, m.list_id, m.thread_id,
    (SELECT count(*) FROM messages c WHERE c.thread_id = m.thread_id) AS thread_messages
    FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id JOIN message_state s ON s.id = m.id
    LEFT JOIN message_text t ON t.id = m.id
    WHERE 1 = 1";

fn row_of(r: Row) -> MessageRow {
    MessageRow {
        place: r.place.into(),
        message_id: r.message_id,
        from: r.from_addr,
        to: r.to_addr,
        cc: r.cc_addr,
        subject: r.subject,
        date: r
            .date
            .map(|t| mail_parser::DateTime::from_timestamp(t).to_rfc3339()),
        size: r.size as u64,
        has_attachments: r.has_attachments,
        flags: serde_json::from_str(&r.flags).unwrap_or_default(),
        snippet: r.snippet,
        list: r.list_id,
        thread: r.thread_id,
        thread_messages: r.thread_messages.max(0) as u64,
    }
}

/// What a write needs to know about a message: where it is and its state. Far cheaper to
/// read for 10,000 messages than full rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRef {
    pub id: i64,
    pub account: AccountId,
    pub mailbox: String,
    /// The provider's id of this copy (IMAP `UIDVALIDITY:UID`, a Gmail message id).
    pub remote_id: RemoteId,
    /// The provider's change marker when last seen (empty when it keeps none).
    pub version: Version,
    /// The Message-ID header, to find the message again after it moved.
    pub message_id: Option<String>,
    /// Its size in bytes, which a move keeps.
    pub size: u64,
    pub read: bool,
    pub flagged: bool,
    pub tags: Vec<String>,
    /// The provider's raw values (IMAP flags, Gmail label ids).
    pub raw: Vec<String>,
}

/// A message's place and state as `SELECT` reads it for display.
#[derive(sqlx::FromRow)]
struct PlaceRow {
    id: i64,
    #[sqlx(try_from = "String")]
    account_id: AccountId,
    name: String,
    remote_id: String,
    version: String,
    #[sqlx(try_from = "crate::sql::Bit")]
    is_read: bool,
    #[sqlx(try_from = "crate::sql::Bit")]
    is_flagged: bool,
    tags: String,
    flags: String,
    message_id: Option<String>,
    size: i64,
}

impl From<PlaceRow> for MessageRef {
    fn from(r: PlaceRow) -> MessageRef {
        ref_of(RefRow(
            r.id,
            r.account_id,
            r.name,
            r.remote_id,
            r.version,
            i64::from(r.is_read),
            i64::from(r.is_flagged),
            serde_json::from_str(&r.tags).unwrap_or_default(),
            serde_json::from_str(&r.flags).unwrap_or_default(),
            r.message_id,
            r.size,
        ))
    }
}

/// Write targets come back from SQLite as one JSON array of arrays: decoding 10,000 rows
/// through the driver row by row costs about three times as much. Columns in `RefRow` order;
/// `tags` and `flags` are JSON arrays already.
const SELECT_REFS: &str = "SELECT json_group_array(json_array(m.id, b.account_id, b.name,
    m.remote_id, s.version, s.is_read, s.is_flagged, json(s.tags),
    json(s.flags), m.message_id, m.size) ORDER BY m.id)
    FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id JOIN message_state s ON s.id = m.id
    WHERE 1 = 1";

/// `SELECT_REFS` in PostgreSQL's words (its JSON functions; `null` for no rows).
const SELECT_REFS_PG: &str = "SELECT CAST(COALESCE(json_agg(json_build_array(m.id,
    b.account_id, b.name, m.remote_id, s.version, s.is_read, s.is_flagged,
    CAST(s.tags AS json), CAST(s.flags AS json), m.message_id, m.size) ORDER BY m.id), '[]')
    AS text)
    FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id JOIN message_state s ON s.id = m.id
    WHERE 1 = 1";

/// What is answered for a message id the index does not hold.
pub fn no_message(id: i64) -> Error {
    Error::not_found(format!("no message with id {id}"))
        .with_next_step("run: mailbroker search QUERY to find message ids")
}

/// The mailboxes holding at least one message of a selection: `SELECT_REFS`'s tables, but
/// each mailbox's search stops at its first match. The caller closes the parenthesis.
const SELECT_PLACES: &str = "SELECT b.account_id, b.name FROM mailboxes b WHERE EXISTS (
    SELECT 1 FROM messages m JOIN message_state s ON s.id = m.id WHERE m.mailbox_id = b.id";

#[derive(serde::Deserialize)]
struct RefRow(
    i64,
    AccountId,
    String,
    String,
    String,
    i64,
    i64,
    Vec<String>,
    Vec<String>,
    Option<String>,
    i64,
);

fn ref_of(r: RefRow) -> MessageRef {
    MessageRef {
        id: r.0,
        account: r.1,
        mailbox: r.2,
        remote_id: RemoteId::new(r.3),
        version: Version::new(r.4),
        read: r.5 != 0,
        flagged: r.6 != 0,
        tags: r.7,
        raw: r.8,
        message_id: r.9,
        size: u64::try_from(r.10).unwrap_or(0),
    }
}

/// Runs a `SELECT_REFS` query and decodes its one JSON value.
async fn fetch_refs(store: &Store, mut q: Sql) -> Result<Vec<MessageRef>, Error> {
    let text: String = q
        .build_query_scalar()
        .fetch_one(store.pool())
        .await
        .map_err(db_error)?;
    let rows: Vec<RefRow> = serde_json::from_str(&text)
        .map_err(|e| Error::internal(format!("index: bad target rows: {e}")))?;
    store.read_messages(rows.len());
    Ok(rows.into_iter().map(ref_of).collect())
}

/// (account, mailbox) pairs as the index holds them, each account id read as one.
fn places_of(
    places: std::collections::BTreeSet<(String, String)>,
) -> Result<Vec<(AccountId, String)>, Error> {
    places
        .into_iter()
        .map(|(account, mailbox)| Ok((account.parse()?, mailbox)))
        .collect()
}

fn push_ids(q: &mut Sql, ids: &[i64]) {
    q.push(" AND m.id IN (");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(*id);
    }
    q.push(")");
}

impl Store {
    /// A statement of write targets (`SELECT_REFS`), its conditions to follow.
    fn select_refs(&self) -> Sql {
        Sql::new(self.backend(), self.refs_start())
    }

    fn refs_start(&self) -> &'static str {
        self.backend().pick(SELECT_REFS, SELECT_REFS_PG)
    }

    /// The words of a query's phrases, where PostgreSQL matches them (`words`); cut once for
    /// every statement of one search.
    async fn lexicon(&self, query: &Query) -> Result<Option<Arc<Lexicon>>, Error> {
        Ok(match self.backend() {
            Backend::Sqlite => None,
            Backend::Postgres => Some(Lexicon::of(query).await?),
        })
    }

    /// A statement over a query's matches, from `start`.
    fn query_sql(&self, start: &str, lexicon: &Option<Arc<Lexicon>>) -> Sql {
        Sql::new(self.backend(), start).with_lexicon(lexicon.clone())
    }

    pub async fn message(&self, id: i64) -> Result<MessageRow, Error> {
        let mut q = Sql::new(self.backend(), SELECT);
        q.push(" AND m.id = ").push_bind(id);
        let row: Option<Row> = q
            .build_query_as()
            .fetch_optional(self.pool())
            .await
            .map_err(db_error)?;
        row.map(row_of).ok_or_else(|| no_message(id))
    }

    /// Write targets by id; an unknown id is `not_found`.
    pub async fn message_refs(&self, ids: &[i64]) -> Result<Vec<MessageRef>, Error> {
        let out = self.existing_refs(ids).await?;
        let found: std::collections::HashSet<i64> = out.iter().map(|r| r.id).collect();
        match ids.iter().find(|id| !found.contains(id)) {
            Some(missing) => Err(no_message(*missing)),
            None => Ok(out),
        }
    }

    /// The rows of those ids that are still in the index (a deleted one is not).
    pub async fn existing_refs(&self, ids: &[i64]) -> Result<Vec<MessageRef>, Error> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut q = self.select_refs();
            push_ids(&mut q, chunk);
            out.extend(fetch_refs(self, q).await?);
        }
        Ok(out)
    }

    /// The (account, mailbox) pairs of a selection (ids, or a query's matches), without
    /// reading its messages: enough to start connecting before the targets are read. An
    /// unknown id is `not_found`, as when the targets are read.
    pub async fn selection_places(
        &self,
        ids: &[i64],
        query: Option<&Query>,
    ) -> Result<Vec<(AccountId, String)>, Error> {
        let mut out = std::collections::BTreeSet::new();
        if let Some(query) = query {
            let mut q = self.query_sql(SELECT_PLACES, &self.lexicon(query).await?);
            push_terms(&mut q, query);
            q.push(")");
            let rows: Vec<(String, String)> = q
                .build_query_as()
                .fetch_all(self.pool())
                .await
                .map_err(db_error)?;
            out.extend(rows);
            return places_of(out);
        }
        let mut found = std::collections::HashSet::new();
        for chunk in ids.chunks(500) {
            let mut q = Sql::new(
                self.backend(),
                "SELECT m.id, b.account_id, b.name
                 FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE 1 = 1",
            );
            push_ids(&mut q, chunk);
            let rows: Vec<(i64, String, String)> = q
                .build_query_as()
                .fetch_all(self.pool())
                .await
                .map_err(db_error)?;
            for (id, account, mailbox) in rows {
                found.insert(id);
                out.insert((account, mailbox));
            }
        }
        match ids.iter().find(|id| !found.contains(id)) {
            Some(missing) => Err(no_message(*missing)),
            None => places_of(out),
        }
    }

    /// Write targets matching every term, in id order.
    pub async fn search_refs(&self, query: &Query) -> Result<Vec<MessageRef>, Error> {
        let mut q = self.query_sql(self.refs_start(), &self.lexicon(query).await?);
        push_terms(&mut q, query);
        fetch_refs(self, q).await
    }

    /// How many messages match the query in all.
    pub async fn count(&self, query: &Query) -> Result<u64, Error> {
        let lexicon = self.lexicon(query).await?;
        Ok(self.found(query, &lexicon).await?.count())
    }

    /// What a query finds before its page is read: the number of matches (counted, or kept for
    /// a frequent word alone), or, when its posting lists are merged here, the matches
    /// themselves.
    async fn found(&self, query: &Query, lexicon: &Option<Arc<Lexicon>>) -> Result<Found, Error> {
        if let Some(word) = self.frequent(query).await? {
            return Ok(Found::Frequent(word));
        }
        // Both engines: PostgreSQL's own plans for the same set algebra read each list again
        // for the count and for the page, and walked every match's row for its date
        // (BENCHMARKS.md, "The index on PostgreSQL").
        if let Some(merged) = merged(query, self.backend()) {
            return Ok(Found::Ids(postings::matches(self, &merged, lexicon).await?));
        }
        let n: i64 = count_sql(query, self.query_sql("", lexicon))
            .build_query_scalar()
            .fetch_one(self.pool())
            .await
            .map_err(db_error)?;
        Ok(Found::Counted(n.max(0) as u64))
    }

    /// One page of matches, newest first, and how many match in all. The count comes first:
    /// how a page is best read depends on it (`query::push_page_ids`).
    pub async fn search_page(
        &self,
        query: &Query,
        limit: u32,
        offset: u64,
    ) -> Result<SearchPage, Error> {
        let lexicon = self.lexicon(query).await?;
        let found = self.found(query, &lexicon).await?;
        let rows = self.page(query, &lexicon, &found, (limit, offset)).await?;
        // The two may read either side of a sync's commit; the page is what was shown.
        let total = found.count().max(offset + rows.len() as u64);
        Ok(SearchPage { rows, total })
    }

    /// Messages matching every term, newest first, skipping the first `offset`.
    pub async fn search(
        &self,
        query: &Query,
        limit: u32,
        offset: u64,
    ) -> Result<Vec<MessageRow>, Error> {
        Ok(self.search_page(query, limit, offset).await?.rows)
    }

    /// A page of what a query found: its ids are found first, alone; only its rows are then
    /// read whole.
    async fn page(
        &self,
        query: &Query,
        lexicon: &Option<Arc<Lexicon>>,
        found: &Found,
        (limit, offset): (u32, u64),
    ) -> Result<Vec<MessageRow>, Error> {
        let matches = found.count();
        if offset >= matches {
            return Ok(Vec::new());
        }
        let mut q = self.query_sql(SELECT, lexicon);
        q.push(" AND m.id IN (");
        match found {
            Found::Ids(ids) if matches > SORTED_PAGE_UP_TO => {
                let page = postings::page_of(self, ids, limit, offset).await?;
                push_page_of_ids(&mut q, json_ids(&page)?, page.len() as u64, limit, 0);
            }
            Found::Ids(ids) => push_page_of_ids(&mut q, json_ids(ids)?, matches, limit, offset),
            Found::Counted(_) => push_page_ids(&mut q, query, matches, limit, offset),
            Found::Frequent(word) => push_page_of_frequent(&mut q, word.slot, limit, offset),
        }
        q.push(") ORDER BY m.date DESC, m.id DESC");
        let rows: Vec<Row> = q
            .build_query_as()
            .fetch_all(self.pool())
            .await
            .map_err(db_error)?;
        Ok(rows.into_iter().map(row_of).collect())
    }
}

/// Ids as the JSON array a statement reads with `json_each`.
pub(super) fn json_ids(ids: &[i64]) -> Result<String, Error> {
    serde_json::to_string(ids).map_err(|e| Error::internal(format!("index: message ids: {e}")))
}
