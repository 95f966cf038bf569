//! The store's side of a sync: `StoreSink` writes what an adapter learns, in batches, each
//! batch in one transaction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::sql::Sql;
use async_trait::async_trait;
use mailbroker_core::{
    AccountId, ApplyEach, Arrival, Conversation, Error, MailboxCursor, MailboxInfo, MessageFlags,
    MessageMeta, MessageText, RemoteId, Result, Seen, Settled, SyncSink, Version,
};
use sqlx::{Any, AnyConnection};
use tokio::sync::mpsc;

use super::leases::{AccountLock, Fence};
use super::words::{self, Document};
use super::{Backend, Store, db_error, frequent, now_secs, replace_tags};

mod fulltext;
mod moves;

/// Rows per multi-row INSERT: 17 bound values each stays far below SQLite's variable limit.
const INSERT_CHUNK: usize = 200;
/// Ids per `IN (…)` list.
const DELETE_CHUNK: usize = 500;

pub(super) async fn upsert_mailbox(
    conn: &mut AnyConnection,
    account: &str,
    mb: &MailboxInfo,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO mailboxes (account_id, name, role, role_source, delimiter, selectable,
           remote_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT(account_id, name) DO UPDATE SET
           role = excluded.role, role_source = excluded.role_source,
           delimiter = excluded.delimiter, selectable = excluded.selectable,
           remote_id = excluded.remote_id",
    )
    .bind(account)
    .bind(&mb.name)
    .bind(mb.role.map(|r| r.as_str()))
    .bind(mb.role.and(mb.role_source).map(|s| s.as_str()))
    .bind(mb.delimiter.as_deref())
    .bind(i64::from(mb.selectable))
    .bind(mb.remote.as_deref())
    .execute(conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The id `thread:` and search rows name a conversation by: 12 hex digits of a SHA-256 of
/// the account, of the provider's thread key and, for a conversation read from headers, of
/// the subject it shares (`conversation_subject`). Short, since every search row carries it;
/// stable across versions and machines, since a person may write it down; free of the
/// characters a Message-ID or a Graph conversationId may hold, which the query language
/// would need quoted; and never one conversation across accounts, nor one that a stranger
/// joins by naming its Message-ID under another subject.
pub fn thread_id(account: &str, conversation: &Conversation, subject: &str) -> String {
    match conversation {
        Conversation::Server(key) => scoped_thread_id(account, &key_hash(key), None),
        Conversation::Headers(root) => {
            let subject = mailbroker_core::conversation_subject(subject);
            scoped_thread_id(account, &key_hash(root), Some(&subject))
        }
    }
}

/// The hash of a thread key alone: what an index kept as a message's thread before
/// conversations were an account's, from which `scoped_thread_id` is made (the upgrade
/// rewrites old rows with it, `store::rethread`).
fn key_hash(key: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(key.as_bytes())[..6])
}

pub(super) fn scoped_thread_id(account: &str, key_hash: &str, subject: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(account.as_bytes());
    h.update([0]);
    h.update(key_hash.as_bytes());
    if let Some(subject) = subject {
        h.update([0]);
        h.update(subject.as_bytes());
    }
    hex::encode(&h.finalize()[..6])
}

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_string())
}

fn json_ids(ids: &[RemoteId]) -> Result<String> {
    serde_json::to_string(ids).map_err(|e| Error::internal(e.to_string()))
}

/// How far a sync is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncProgress {
    /// Messages fetched with their headers, of about `total`.
    Headers { fetched: u64, total: u64 },
    /// Messages whose text is filled in, of `total`; the headers are all indexed.
    Text { filled: u64, total: u64 },
}

pub struct StoreSink {
    store: Store,
    account: AccountId,
    /// Mailbox name → row id.
    mailboxes: HashMap<String, i64>,
    /// The authserv-ids whose verdicts the account trusts, read on first use.
    trusted: Option<Vec<String>>,
    on_progress: Option<Box<dyn FnMut(SyncProgress) + Send + Sync>>,
    /// Message batches are written by a separate task, so fetching the next batch from the
    /// server overlaps with writing the last one. Everything else waits for it (`flush`).
    writer: Option<Writer>,
    /// The account's lease, when the sync holds one: its writes check it is still theirs,
    /// and it steps aside at a checkpoint (once everything read so far is written) when a
    /// write waits for the account.
    lease: Option<AccountLock>,
    /// The fence of a lease someone else holds (a deletion run's session, which syncs on it):
    /// its writes check the lease is still there, and it never steps aside.
    fence: Option<Fence>,
    /// Messages handed to the writer so far.
    arrived: usize,
    /// `arrived` when the planner last learnt of the rows (`Store::analyze_messages`).
    analyzed: usize,
}

/// Messages a sync brings after which the planner's statistics are refreshed at its end
/// (`Store::refresh_statistics`): a first sync, say.
const MANY: usize = 1000;

/// Whether the index's statistics were refreshed (PostgreSQL's planner's, SQLite's frequent
/// words): a refusal only leaves the work to autovacuum, or searches reading a word's ids, so
/// the sync goes on.
fn refreshed(done: Result<()>) {
    if let Err(e) = done {
        tracing::warn!(error = %e, "index: statistics not refreshed");
    }
}

/// What the writer task writes: new messages (headers), or the text of indexed ones.
enum Batch {
    /// New rows, each with the account's own server's verdict (`auth:`).
    Messages(i64, Vec<MessageMeta>, Vec<Option<&'static str>>),
    /// With its full-text rows being made meanwhile, on PostgreSQL.
    Text(i64, Arc<Vec<MessageText>>, Option<fulltext::Ahead>),
}

type Writer = (mpsc::Sender<Batch>, tokio::task::JoinHandle<Result<()>>);

impl StoreSink {
    pub fn new(store: Store, account: AccountId) -> StoreSink {
        StoreSink {
            store,
            account,
            mailboxes: HashMap::new(),
            trusted: None,
            on_progress: None,
            writer: None,
            lease: None,
            fence: None,
            arrived: 0,
            analyzed: 0,
        }
    }

    /// Holds the account for the sync by `lease`, stepping aside at each checkpoint where a
    /// write waits for it.
    pub fn with_lease(mut self, lease: AccountLock) -> StoreSink {
        self.lease = Some(lease);
        self
    }

    /// Syncs under a lease its caller holds and keeps (`fence` is that lease's).
    pub fn with_fence(mut self, fence: Fence) -> StoreSink {
        self.fence = Some(fence);
        self
    }

    /// What the sync's writes go by: its own lease's fence, or its caller's.
    fn fence(&self) -> Option<Fence> {
        self.lease
            .as_ref()
            .map(AccountLock::fence)
            .or_else(|| self.fence.clone())
    }

    /// A write transaction, in which the lease (if the sync holds one) is still its own.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, Any>> {
        Fence::begin(self.fence().as_ref(), &self.store).await
    }

    /// Waits until every batch is written, then frees the account for the next in line (a
    /// sink dropped instead frees it in the background).
    pub async fn finish(mut self) -> Result<()> {
        let flushed = self.flush().await;
        if let Some(lease) = self.lease.take() {
            lease.release().await;
        }
        if self.arrived >= MANY {
            refreshed(self.store.refresh_statistics(self.arrived).await);
        }
        if self.arrived > 0 {
            refreshed(self.store.refresh_frequent_words(self.arrived).await);
        }
        flushed
    }

    /// Waits until every batch handed to the writer is committed.
    async fn flush(&mut self) -> Result<()> {
        if let Some((tx, task)) = self.writer.take() {
            drop(tx);
            task.await
                .map_err(|e| Error::internal(format!("index writer failed: {e}")))??;
        }
        Ok(())
    }

    /// Calls `f` as messages arrive and as their text is filled in.
    pub fn on_progress(mut self, f: impl FnMut(SyncProgress) + Send + Sync + 'static) -> StoreSink {
        self.on_progress = Some(Box::new(f));
        self
    }

    /// Hands a batch to the writer task, starting it on first use.
    async fn write(&mut self, batch: Batch) -> Result<()> {
        if self.writer.is_none() {
            let (tx, mut rx) = mpsc::channel::<Batch>(2);
            let store = self.store.clone();
            // Taken now: a sync steps aside (and takes a new fence) only once this is flushed.
            let fence = self.fence();
            let account = self.account.clone();
            let task = tokio::spawn(async move {
                while let Some(batch) = rx.recv().await {
                    match batch {
                        Batch::Messages(mailbox, rows, auth) => {
                            let tx = Fence::begin(fence.as_ref(), &store).await?;
                            insert_batch(tx, &account, mailbox, (&rows, &auth)).await?
                        }
                        Batch::Text(mailbox, texts, ahead) => {
                            // Made before the transaction opens, which holds the lease's row.
                            let made = fulltext::made_ahead(ahead).await?;
                            let tx = Fence::begin(fence.as_ref(), &store).await?;
                            write_text(tx, mailbox, &texts, made).await?
                        }
                    }
                }
                Ok(())
            });
            self.writer = Some((tx, task));
        }
        if let Some((tx, _)) = &self.writer
            && tx.send(batch).await.is_ok()
        {
            return Ok(());
        }
        // The writer stopped: its error says why.
        self.flush().await?;
        Err(Error::internal("index writer stopped unexpectedly"))
    }

    fn report(&mut self, progress: SyncProgress) {
        if let Some(f) = self.on_progress.as_mut() {
            f(progress);
        }
    }

    fn mailbox(&self, name: &str) -> Result<i64> {
        self.mailboxes
            .get(name)
            .copied()
            .ok_or_else(|| Error::internal(format!("sync reported unknown mailbox {name:?}")))
    }

    async fn delete_ids(&self, mailbox_id: i64, ids: &[RemoteId]) -> Result<u64> {
        let mut removed = 0;
        let mut tx = self.begin().await?;
        for chunk in ids.chunks(DELETE_CHUNK) {
            let mut q = Sql::new(
                self.store.backend(),
                "DELETE FROM messages WHERE mailbox_id = ",
            );
            q.push_bind(mailbox_id).push(" AND remote_id IN (");
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(id.as_str());
            }
            q.push(")");
            removed += q
                .build()
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
        }
        tx.commit().await.map_err(db_error)?;
        Ok(removed)
    }
}

/// What each event does to the index.
#[async_trait]
impl ApplyEach for StoreSink {
    async fn mailboxes(&mut self, list: &[MailboxInfo]) -> Result<()> {
        self.flush().await?;
        let mut tx = self.begin().await?;
        for mb in list {
            upsert_mailbox(&mut tx, self.account.as_str(), mb).await?;
        }
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, name FROM mailboxes WHERE account_id = $1")
                .bind(self.account.as_str())
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
        let listed: HashSet<&str> = list.iter().map(|m| m.name.as_str()).collect();
        self.mailboxes.clear();
        for (id, name) in rows {
            if listed.contains(name.as_str()) {
                self.mailboxes.insert(name, id);
            } else {
                // Gone from the server: its messages go with it (cascade).
                sqlx::query("DELETE FROM mailboxes WHERE id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
            }
        }
        tx.commit().await.map_err(db_error)
    }

    async fn reset_mailbox(&mut self, mailbox: &str) -> Result<()> {
        self.flush().await?;
        let id = self.mailbox(mailbox)?;
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM messages WHERE mailbox_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        sqlx::query("UPDATE mailboxes SET cursor = '' WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn upsert_messages(&mut self, mailbox: &str, messages: Vec<MessageMeta>) -> Result<()> {
        let mailbox_id = self.mailbox(mailbox)?;
        self.arrived += messages.len();
        if self.trusted.is_none() {
            self.trusted = Some(self.store.trusted_authserv_ids(&self.account).await?);
        }
        let trusted = self.trusted.as_deref().unwrap_or_default();
        let auth = (messages.iter())
            .map(|m| {
                let headers: Vec<&str> = m.auth_results.iter().map(String::as_str).collect();
                mailbroker_core::verdicts(&headers, trusted).map(|v| v.overall().as_str())
            })
            .collect();
        self.write(Batch::Messages(mailbox_id, messages, auth))
            .await
    }

    async fn fill_text(&mut self, mailbox: &str, texts: Vec<MessageText>) -> Result<()> {
        let mailbox_id = self.mailbox(mailbox)?;
        let texts = Arc::new(texts);
        // PostgreSQL's words are cut while the writer writes the batch before.
        let ahead = (self.store.backend() == Backend::Postgres)
            .then(|| fulltext::ahead(&self.store, mailbox_id, texts.clone()));
        self.write(Batch::Text(mailbox_id, texts, ahead)).await
    }

    async fn update_flags(
        &mut self,
        mailbox: &str,
        changes: Vec<(RemoteId, Version, MessageFlags)>,
    ) -> Result<u64> {
        self.flush().await?;
        let mailbox_id = self.mailbox(mailbox)?;
        let mut retagged = Vec::new();
        let mut tx = self.begin().await?;
        for (id, version, flags) in changes {
            // Only rows whose flags really differ count as changed; the version is kept fresh
            // either way so later preconditions compare against the server's latest value.
            let raw = json_list(&flags.raw);
            let tags = json_list(&flags.tags);
            let updated: Option<i64> = sqlx::query_scalar(
                "UPDATE message_state SET flags = $1, tags = $2, is_read = $3, is_flagged = $4
                 WHERE id = (SELECT id FROM messages WHERE mailbox_id = $5 AND remote_id = $6)
                   AND flags IS DISTINCT FROM $7
                 RETURNING id",
            )
            .bind(&raw)
            .bind(&tags)
            .bind(i64::from(flags.read))
            .bind(i64::from(flags.flagged))
            .bind(mailbox_id)
            .bind(id.as_str())
            .bind(&raw)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(id) = updated {
                retagged.push((id, tags));
            }
            if version.is_known() {
                sqlx::query(
                    "UPDATE message_state SET version = $1 WHERE id = (SELECT id FROM messages
                       WHERE mailbox_id = $2 AND remote_id = $3)",
                )
                .bind(version.as_str())
                .bind(mailbox_id)
                .bind(id.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            }
        }
        replace_tags(&mut tx, &retagged).await?;
        let changed = retagged.len() as u64;
        tx.commit().await.map_err(db_error)?;
        Ok(changed)
    }

    async fn remove_messages(&mut self, mailbox: &str, ids: Vec<RemoteId>) -> Result<u64> {
        self.flush().await?;
        let mailbox_id = self.mailbox(mailbox)?;
        self.delete_ids(mailbox_id, &ids).await
    }

    async fn account_cursor(&mut self, cursor: &str) -> Result<()> {
        self.flush().await?;
        self.store.set_sync_cursor(&self.account, cursor).await
    }

    async fn mailbox_done(&mut self, mailbox: &str, cursor: MailboxCursor) -> Result<()> {
        self.flush().await?;
        let mailbox_id = self.mailbox(mailbox)?;
        sqlx::query("UPDATE mailboxes SET cursor = $1, synced_at = $2 WHERE id = $3")
            .bind(cursor.as_str())
            .bind(now_secs())
            .bind(mailbox_id)
            .execute(self.store.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

#[async_trait]
impl SyncSink for StoreSink {
    async fn apply(&mut self, seen: Seen) -> Result<u64> {
        self.apply_seen(seen).await
    }

    async fn text_pending(&mut self, mailbox: &str) -> Result<Vec<RemoteId>> {
        self.flush().await?;
        // The text pass finds each message by its remote id: planned for the empty table a
        // first sync starts from, every batch of it read the whole mailbox (BENCHMARKS.md,
        // "The index on PostgreSQL beside SQLite").
        if self.arrived - self.analyzed >= MANY {
            refreshed(self.store.analyze_messages().await);
            self.analyzed = self.arrived;
        }
        let mailbox_id = self.mailbox(mailbox)?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT remote_id FROM messages WHERE mailbox_id = $1 AND text_pending = 1 ORDER BY id",
        )
        .bind(mailbox_id)
        .fetch_all(self.store.pool())
        .await
        .map_err(db_error)?;
        Ok(ids.into_iter().map(RemoteId::new).collect())
    }

    async fn indexed_except(
        &mut self,
        mailbox: &str,
        present: Vec<RemoteId>,
    ) -> Result<Vec<RemoteId>> {
        self.flush().await?;
        let mailbox_id = self.mailbox(mailbox)?;
        let keep: HashSet<RemoteId> = present.into_iter().collect();
        let local: Vec<String> =
            sqlx::query_scalar("SELECT remote_id FROM messages WHERE mailbox_id = $1")
                .bind(mailbox_id)
                .fetch_all(self.store.pool())
                .await
                .map_err(db_error)?;
        Ok(local
            .into_iter()
            .map(RemoteId::new)
            .filter(|id| !keep.contains(id))
            .collect())
    }

    async fn known_elsewhere(
        &mut self,
        mailbox: &str,
        message_ids: Vec<String>,
    ) -> Result<HashSet<String>> {
        self.flush().await?;
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT m.message_id FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
             WHERE b.account_id = $1 AND b.name != $2
               AND m.message_id IN (SELECT value FROM json_each($3))",
        )
        .bind(self.account.as_str())
        .bind(mailbox)
        .bind(json_list(&message_ids))
        .fetch_all(self.store.pool())
        .await
        .map_err(db_error)?;
        Ok(found.into_iter().collect())
    }

    async fn settle_moves(
        &mut self,
        departures: Vec<(String, Vec<RemoteId>)>,
        arrivals: Vec<(String, Vec<Arrival>)>,
    ) -> Result<Vec<Settled>> {
        self.flush().await?;
        let (by_content, by_id) = moves::by_how_recognised(arrivals);
        let mut settled = self.settle_by_content(departures, by_content).await?;
        for (mailbox, list) in by_id {
            let done = self.settle_by_id(&mailbox, list).await?;
            let entry = settled.entry(mailbox).or_default();
            entry.moved_in += done.moved_in;
            entry.unmatched.extend(done.unmatched);
        }
        Ok(settled
            .into_iter()
            .map(|(mailbox, s)| Settled { mailbox, ..s })
            .collect())
    }

    async fn indexed_ids(&mut self) -> Result<Vec<RemoteId>> {
        self.flush().await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT m.remote_id FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
             WHERE b.account_id = $1",
        )
        .bind(self.account.as_str())
        .fetch_all(self.store.pool())
        .await
        .map_err(db_error)?;
        Ok(ids.into_iter().map(RemoteId::new).collect())
    }

    async fn checkpoint(&mut self) -> Result<()> {
        let Some(lease) = self.lease.as_ref() else {
            return Ok(());
        };
        if !lease.awaited().await? {
            return Ok(());
        }
        self.flush().await?;
        match self.lease.as_mut() {
            Some(lease) => lease.step_aside().await,
            None => Ok(()),
        }
    }

    fn progress(&mut self, fetched: u64, total_hint: u64) {
        self.report(SyncProgress::Headers {
            fetched,
            total: total_hint,
        });
    }

    fn text_progress(&mut self, filled: u64, total: u64) {
        self.report(SyncProgress::Text { filled, total });
    }
}

/// The snippet as the full-text index takes it, from a row `v` with `snippet` and `body`: only
/// where the body text does not already begin with it. An IMAP snippet is the first words of
/// the body text, indexed again in `body`; a Gmail snippet has no body text beside it and is
/// indexed as itself. The same words match either way, in less index (BENCHMARKS.md).
macro_rules! fts_snippet {
    () => {
        "CASE WHEN substr(v.body, 1, length(v.snippet)) = v.snippet THEN NULL ELSE v.snippet END"
    };
}

/// Inserts (or refreshes) one batch of messages and their full-text rows in one transaction.
async fn insert_batch(
    mut tx: sqlx::Transaction<'static, Any>,
    account: &AccountId,
    mailbox_id: i64,
    (messages, auth): (&[MessageMeta], &[Option<&'static str>]),
) -> Result<()> {
    let backend = Backend::of(&tx);
    for (chunk, verdicts) in messages.chunks(INSERT_CHUNK).zip(auth.chunks(INSERT_CHUNK)) {
        let mut q = Sql::new(
            backend,
            "INSERT INTO messages (mailbox_id, remote_id, message_id, from_addr,
                   to_addr, cc_addr, subject, date, size, has_attachments, text_pending, list_id,
                   thread_id, auth) ",
        );
        q.push_values(chunk.iter().zip(verdicts), |mut row, (m, verdict)| {
            row.push_bind(mailbox_id)
                .push_bind(m.id.as_str())
                .push_bind(m.message_id.clone())
                .push_bind(m.from.clone())
                .push_bind(m.to.clone())
                .push_bind(m.cc.clone())
                .push_bind(m.subject.clone())
                .push_bind(m.date)
                .push_bind(m.size as i64)
                .push_bind(i64::from(m.has_attachments))
                .push_bind(i64::from(m.text_pending))
                .push_bind(m.list.clone())
                .push_bind(
                    m.thread
                        .as_ref()
                        .map(|c| thread_id(account.as_str(), c, &m.subject)),
                )
                .push_bind(*verdict);
        });
        // A message indexed before keeps its row and id (the update makes RETURNING report
        // that id too), and takes the list and conversation its headers say now: an index
        // from before those columns learns them from a `sync --full`.
        q.push(
            " ON CONFLICT(mailbox_id, remote_id) DO UPDATE SET remote_id = excluded.remote_id,
                 list_id = excluded.list_id, thread_id = excluded.thread_id, auth = excluded.auth
                 RETURNING id, remote_id",
        );
        let ids: Vec<(i64, String)> = q
            .build_query_as()
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
        let by_id: HashMap<String, i64> = ids.into_iter().map(|(id, r)| (r, id)).collect();
        let local = |m: &MessageMeta| by_id.get(m.id.as_str()).copied();
        let mut state = Sql::new(
            backend,
            "INSERT INTO message_state (id, mailbox_id, version, is_read, is_flagged, flags, tags) ",
        );
        state.push_values(chunk, |mut row, m| {
            row.push_bind(local(m))
                .push_bind(mailbox_id)
                .push_bind(m.version.as_str())
                .push_bind(i64::from(m.flags.read))
                .push_bind(i64::from(m.flags.flagged))
                .push_bind(json_list(&m.flags.raw))
                .push_bind(json_list(&m.flags.tags));
        });
        state.push(
            " ON CONFLICT(id) DO UPDATE SET mailbox_id = excluded.mailbox_id,
               version = excluded.version, is_read = excluded.is_read,
               is_flagged = excluded.is_flagged, flags = excluded.flags, tags = excluded.tags",
        );
        state.build().execute(&mut *tx).await.map_err(db_error)?;
        let tags: Vec<(i64, String)> = chunk
            .iter()
            .filter_map(|m| Some((local(m)?, json_list(&m.flags.tags))))
            .collect();
        replace_tags(&mut tx, &tags).await?;
        let snippets: Vec<(i64, &str)> = chunk
            .iter()
            .filter(|m| !m.snippet.is_empty())
            .filter_map(|m| Some((local(m)?, m.snippet.as_str())))
            .collect();
        if !snippets.is_empty() {
            // As for the row itself, a message indexed before keeps what it had.
            let mut text = Sql::new(backend, "INSERT INTO message_text ");
            text.push_values(snippets, |mut row, (id, snippet)| {
                row.push_bind(id).push_bind(snippet);
            });
            text.push(" ON CONFLICT DO NOTHING");
            text.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        // A message whose text is still to come gets its full-text row with it, once.
        let complete: Vec<&MessageMeta> = chunk.iter().filter(|m| !m.text_pending).collect();
        if complete.is_empty() {
            continue;
        }
        if backend == Backend::Postgres {
            let documents: Vec<Document> = complete
                .iter()
                .filter_map(|m| {
                    Some(Document {
                        id: local(m)?,
                        subject: &m.subject,
                        from: &m.from,
                        to: &m.to,
                        cc: &m.cc,
                        snippet: &m.snippet,
                        body: &m.body_prefix,
                    })
                })
                .collect();
            words::write(&mut tx, &documents).await?;
            continue;
        }
        let mut fts = Sql::new(
            backend,
            "WITH v(id, subject, addresses, snippet, body) AS (",
        );
        fts.push_values(&complete, |mut row, m| {
            row.push_bind(local(m))
                .push_bind(m.subject.clone())
                .push_bind(format!("{} {} {}", m.from, m.to, m.cc))
                .push_bind(m.snippet.clone())
                .push_bind(m.body_prefix.clone());
        });
        fts.push(concat!(
            ") INSERT OR REPLACE INTO messages_fts (rowid, subject, addresses, snippet, body)
             SELECT v.id, v.subject, v.addresses, ",
            fts_snippet!(),
            ", v.body FROM v"
        ));
        fts.build().execute(&mut *tx).await.map_err(db_error)?;
        let written: Vec<i64> = complete.iter().filter_map(|m| local(m)).collect();
        frequent::recount(&mut tx, &written).await?;
    }
    tx.commit().await.map_err(db_error)
}

/// The text of indexed messages (by id in one mailbox): their snippet and attachment flag,
/// and their full-text row, written whole (subject and addresses from the row) in one
/// transaction.
async fn write_text(
    mut tx: sqlx::Transaction<'static, Any>,
    mailbox_id: i64,
    texts: &[MessageText],
    mut made: fulltext::Made,
) -> Result<()> {
    // Each statement (before and after the mailbox id) with whether it reads the body
    // prefix, the one large value: the others get NULL there rather than a copy of it.
    const STATEMENTS: [(&str, &str, bool); 3] = [
        (
            "UPDATE messages SET has_attachments = v.has_attachments, text_pending = 0
             FROM v WHERE messages.remote_id = v.remote_id AND messages.mailbox_id = ",
            "",
            false,
        ),
        (
            "INSERT INTO message_text (id, snippet) SELECT m.id, v.snippet
             FROM v JOIN messages m ON m.remote_id = v.remote_id AND m.mailbox_id = ",
            " WHERE true ON CONFLICT (id) DO UPDATE SET snippet = excluded.snippet",
            false,
        ),
        (
            concat!(
                "INSERT OR REPLACE INTO messages_fts (rowid, subject, addresses, snippet, body)
                 SELECT m.id, m.subject, m.from_addr || ' ' || m.to_addr || ' ' || m.cc_addr, ",
                fts_snippet!(),
                ", v.body FROM v JOIN messages m ON m.remote_id = v.remote_id AND m.mailbox_id = "
            ),
            "",
            true,
        ),
    ];
    let backend = Backend::of(&tx);
    for chunk in texts.chunks(INSERT_CHUNK) {
        // PostgreSQL's full-text rows are written below (`words_of_texts`).
        let statements = backend.pick(&STATEMENTS[..], &STATEMENTS[..2]);
        for &(statement, tail, reads_body) in statements {
            let mut q = Sql::new(
                backend,
                "WITH v(remote_id, has_attachments, snippet, body) AS (",
            );
            q.push_values(chunk, |mut row, t| {
                row.push_bind(t.id.as_str())
                    .push_bind(i64::from(t.has_attachments))
                    .push_bind(t.snippet.clone())
                    .push_bind(reads_body.then(|| t.body_prefix.clone()));
            });
            q.push(") ")
                .push(statement)
                .push_bind(mailbox_id)
                .push(tail);
            q.build().execute(&mut *tx).await.map_err(db_error)?;
        }
        match backend {
            Backend::Postgres => fulltext::write(&mut tx, mailbox_id, chunk, &mut made).await?,
            // Their ids are read only where there are words to recount: reading them took a
            // first sync of 100,000 messages 0.2 s more.
            Backend::Sqlite if frequent::any_chosen(&mut tx).await? => {
                let written = local_ids(&mut tx, mailbox_id, chunk).await?;
                frequent::recount(&mut tx, &written).await?;
            }
            Backend::Sqlite => {}
        }
    }
    tx.commit().await.map_err(db_error)
}

/// The local ids of `texts`' messages in one mailbox.
async fn local_ids(
    tx: &mut AnyConnection,
    mailbox_id: i64,
    texts: &[MessageText],
) -> Result<Vec<i64>> {
    let remote: Vec<RemoteId> = texts.iter().map(|t| t.id.clone()).collect();
    sqlx::query_scalar(
        "SELECT id FROM messages WHERE mailbox_id = $1
         AND remote_id IN (SELECT value FROM json_each($2))",
    )
    .bind(mailbox_id)
    .bind(json_ids(&remote)?)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)
}
