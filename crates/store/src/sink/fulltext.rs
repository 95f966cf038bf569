//! PostgreSQL's full-text rows of the messages a sync's second pass brings the text of.
//! Their words are cut and written out as `tsvector`s by the process (`store::words`), work
//! as long as the server's; it is done for one batch while the writer writes the one before
//! (`ahead`), so the two go on side by side rather than in turn.

use std::collections::HashMap;
use std::sync::Arc;

use mailbroker_core::{Error, MessageText, Result};
use sqlx::AnyConnection;

use super::super::sql::Sql;
use super::super::words::{self, Document, Words};
use super::super::{Backend, Store, db_error};

/// Full-text rows by the remote id of their message.
pub(in crate::sink) type Made = HashMap<String, Words>;

/// The rows of a batch being made.
pub(in crate::sink) type Ahead = tokio::task::JoinHandle<Result<Made>>;

/// Starts making the rows of `texts` (messages of mailbox `mailbox_id` whose header rows are
/// committed, as a second pass finds them).
pub(in crate::sink) fn ahead(
    store: &Store,
    mailbox_id: i64,
    texts: Arc<Vec<MessageText>>,
) -> Ahead {
    let store = store.clone();
    tokio::spawn(async move {
        let mut headers = Vec::with_capacity(texts.len());
        {
            let mut conn = store.pool().acquire().await.map_err(db_error)?;
            for chunk in texts.chunks(super::INSERT_CHUNK) {
                headers.extend(headers_of(&mut conn, mailbox_id, chunk.iter()).await?);
            }
        }
        made(&headers, texts.iter()).await
    })
}

/// The rows made ahead, if any were.
pub(in crate::sink) async fn made_ahead(ahead: Option<Ahead>) -> Result<Made> {
    match ahead {
        Some(task) => task
            .await
            .map_err(|e| Error::internal(format!("full-text rows not made: {e}")))?,
        None => Ok(Made::new()),
    }
}

/// Writes the full-text rows of `texts` in `conn`'s transaction: those `ready` holds, and
/// those of messages it lacks, made here.
pub(in crate::sink) async fn write(
    conn: &mut AnyConnection,
    mailbox_id: i64,
    texts: &[MessageText],
    ready: &mut Made,
) -> Result<()> {
    let mut rows = Vec::with_capacity(texts.len());
    let mut missing = Vec::new();
    for text in texts {
        match ready.remove(text.id.as_str()) {
            Some(row) => rows.push(row),
            None => missing.push(text),
        }
    }
    if !missing.is_empty() {
        let headers = headers_of(conn, mailbox_id, missing.iter().copied()).await?;
        rows.extend(made(&headers, missing.into_iter()).await?.into_values());
    }
    words::insert(conn, rows).await
}

/// A message's remote id, local id, subject and addresses (from, to, cc).
type Headers = (String, i64, String, String, String, String);

/// The header fields of the messages of `texts`, read from their rows.
async fn headers_of<'a>(
    conn: &mut AnyConnection,
    mailbox_id: i64,
    texts: impl Iterator<Item = &'a MessageText>,
) -> Result<Vec<Headers>> {
    let mut q = Sql::new(
        Backend::of(conn),
        "SELECT remote_id, id, subject, from_addr, to_addr, cc_addr FROM messages
         WHERE mailbox_id = ",
    );
    q.push_bind(mailbox_id).push(" AND remote_id IN (");
    let mut list = q.separated(", ");
    for t in texts {
        list.push_bind(t.id.as_str());
    }
    q.push(")");
    q.build_query_as()
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)
}

/// The full-text rows of the messages of `texts` that `headers` has a row of.
async fn made<'a>(
    headers: &[Headers],
    texts: impl Iterator<Item = &'a MessageText>,
) -> Result<Made> {
    let by_remote: HashMap<&str, &Headers> = headers.iter().map(|r| (r.0.as_str(), r)).collect();
    let (remote, documents): (Vec<&str>, Vec<Document>) = texts
        .filter_map(|t| {
            let (remote, id, subject, from, to, cc) = by_remote.get(t.id.as_str())?;
            Some((
                remote.as_str(),
                Document {
                    id: *id,
                    subject,
                    from,
                    to,
                    cc,
                    snippet: &t.snippet,
                    body: &t.body_prefix,
                },
            ))
        })
        .unzip();
    let rows = words::rows(&documents).await?;
    Ok(remote.into_iter().map(String::from).zip(rows).collect())
}
