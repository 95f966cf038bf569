//! Sending one account's batches: the loop writes, undos and staged deletions share.
//!
//! Architecture Invariant: the first batch that fails as a whole ends the account's work.
//! Nothing more is sent on a connection whose state is unknown; the batches after it are
//! handed to `Batches::skipped`, which says what became of them.

use async_trait::async_trait;
use mailbroker_core::{Error, ItemResult, Outcome, Provider, RemoteId, Result};

use crate::sessions::Session;
use mailbroker_store::Store;

/// What a change does with one account's batches: how one is sent, and how what came back
/// is recorded (in memory for a write, which journals its results at the end; in the index
/// at once for a staged deletion, which checkpoints per batch).
#[async_trait]
pub(crate) trait Batches: Send {
    type Batch: Send + Sync;

    /// What is done before a batch is sent (a staged deletion settles what the index
    /// already answers); `false`: nothing is left to send. An error here ends the run.
    async fn prepare(&mut self, _batch: &Self::Batch) -> Result<bool> {
        Ok(true)
    }

    /// Sends one batch on the account's session and returns each message's result.
    async fn send(
        &mut self,
        provider: &mut dyn Provider,
        batch: &Self::Batch,
    ) -> Result<Vec<ItemResult>>;

    /// Records what came back for a batch, or the error that ended it.
    async fn record(&mut self, batch: &Self::Batch, sent: Result<Vec<ItemResult>>) -> Result<()>;

    /// A batch not sent because an earlier one failed with `cause`.
    async fn skipped(&mut self, batch: &Self::Batch, cause: &Error) -> Result<()>;
}

/// Runs `batches` in order on the session, recording each through `work`; once `follow`
/// asks to stop, the rest are recorded as not sent. Before each is sent the account's lease
/// is confirmed: a process that lost it (stalled past it, while
/// another took the account) sends nothing more, and its error ends the account's work.
pub(crate) async fn run_account<B: Batches>(
    session: &mut Session,
    store: &Store,
    batches: &[B::Batch],
    work: &mut B,
    follow: &crate::change::Follow,
) -> Result<()> {
    let fence = session.fence();
    let mut broken: Option<Error> = None;
    for batch in batches {
        if broken.is_none() && follow.stopping() {
            broken = Some(crate::change::Follow::stopped());
        }
        if let Some(cause) = &broken {
            work.skipped(batch, cause).await?;
            continue;
        }
        if !work.prepare(batch).await? {
            continue;
        }
        fence.confirm(store).await?;
        let sent = work.send(session.provider.as_mut(), batch).await;
        if let Err(e) = &sent {
            broken = Some(e.clone());
        }
        work.record(batch, sent).await?;
    }
    Ok(())
}

/// Every message of a batch that failed as a whole: `unknown` when the write may have
/// reached the server (the connection dropped after it was sent), else `failed`.
pub(crate) fn failed_as_batch<'a>(
    ids: impl IntoIterator<Item = &'a RemoteId>,
    e: &Error,
) -> Vec<ItemResult> {
    let outcome = match e.is_unknown_outcome() {
        true => Outcome::Unknown,
        false => Outcome::Failed,
    };
    ids.into_iter()
        .map(|id| ItemResult::new(id.clone(), outcome).with_error(e.clone()))
        .collect()
}
