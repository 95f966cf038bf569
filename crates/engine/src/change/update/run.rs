//! Running a change's batches account by account, under each account's lock.

use super::*;
use crate::change::batches::{Batches, failed_as_batch, run_account};
use crate::sessions::Session;
use mailbroker_core::{Provider, RemoteId};

/// Runs every batch, account by account, each account under its lock, and journals each
/// batch's results as it comes back (`Store::record_batch`). A batch that fails marks its
/// messages (unknown outcome when the connection dropped mid-write) and ends that account's
/// work: nothing more is sent on a connection whose state is unknown. A batch whose results
/// cannot be journaled ends the whole change: nothing more is sent that could not be
/// recorded.
///
/// Every account is locked and connected, and the change's intent journaled (`intent`),
/// before the first batch is sent. An account that cannot be reached, or an intent that
/// cannot be journaled, fails the change with nothing sent to any account. Returns the
/// commands sent and the change's id.
pub(super) async fn run_batches(
    sessions: Sessions,
    store: &Store,
    (groups, intents): (&[Group], &[Intent]),
    results: &mut [Option<ItemResult>],
    intent: tokio::task::JoinHandle<Result<i64>>,
    follow: &crate::change::Follow,
) -> Result<(u64, i64)> {
    let owned: Vec<Group>;
    let groups = match follow.detach_above {
        Some(_) => {
            owned = checkpointed(groups);
            &owned[..]
        }
        None => groups,
    };
    let mut by_account: BTreeMap<&AccountId, AccountBatches> = BTreeMap::new();
    for group in groups {
        let batch = (&group.members, &group.batch);
        by_account.entry(&group.account).or_default().push(batch);
    }
    let (open, mut commands, change_id) =
        connected_and_journaled(sessions, store, by_account, intent).await?;
    follow.journaled(change_id);
    // Should this process end before every result is recorded, the change is told from one
    // whose process still runs by these (`Store::interrupt_orphaned`).
    let holders: Vec<String> = open.iter().map(|(s, _)| s.holder().to_string()).collect();
    if let Err(e) = store.set_change_holders(change_id, &holders).await {
        tracing::warn!(error = %e, change = change_id, "the change's holders were not recorded");
    }
    let mut unrecorded_batch = None;
    for (mut session, batches) in open {
        if unrecorded_batch.is_none() {
            let mut writes = Writes {
                store,
                change_id,
                intents,
                results: &mut *results,
                fence: session.fence(),
                follow,
            };
            let ran = run_account(&mut session, store, &batches, &mut writes, follow).await;
            unrecorded_batch = ran.err();
        }
        commands += session.close().await;
    }
    match unrecorded_batch {
        Some(e) => Err(unrecorded(e, change_id)),
        None => Ok((commands, change_id)),
    }
}

/// Messages a batch carries at most where the change is followed (a task): each batch is a
/// checkpoint, where a stop is honoured and the journal is exact.
const CHECKPOINT: usize = 1000;

/// `groups` cut into batches of at most `CHECKPOINT` messages.
fn checkpointed(groups: &[Group]) -> Vec<Group> {
    let mut out = Vec::new();
    for group in groups {
        let parts = group.members.chunks(CHECKPOINT);
        for (members, targets) in parts.zip(group.batch.targets.chunks(CHECKPOINT)) {
            out.push(Group {
                account: group.account.clone(),
                members: members.to_vec(),
                batch: WriteBatch {
                    targets: targets.to_vec(),
                    ..group.batch.clone()
                },
            });
        }
    }
    out
}

/// One account's batches: each with the indexes of its messages among the intents.
type AccountBatches<'a> = Vec<(&'a Vec<usize>, &'a WriteBatch)>;

/// Every account's session, the commands the unused ones sent, and the change's id once
/// its intent is journaled; or, when an account cannot be reached or the intent cannot be
/// journaled, the error, with every session closed and nothing sent.
async fn connected_and_journaled<'a>(
    mut sessions: Sessions,
    store: &Store,
    by_account: BTreeMap<&AccountId, AccountBatches<'a>>,
    intent: tokio::task::JoinHandle<Result<i64>>,
) -> Result<(Vec<(Session, AccountBatches<'a>)>, u64, i64)> {
    let mut open = Vec::with_capacity(by_account.len());
    let mut unreachable = None;
    for (account, batches) in by_account {
        match sessions.take(account).await {
            Ok(session) => open.push((session, batches)),
            Err(e) => {
                unreachable = Some(e);
                break;
            }
        }
    }
    let commands = sessions.close_unused().await;
    let recorded = match intent.await {
        Ok(recorded) => recorded,
        Err(e) => Err(Error::internal(format!("journaling the change: {e}"))),
    };
    if let (None, Ok(id)) = (&unreachable, &recorded) {
        return Ok((open, commands, *id));
    }
    for (session, _) in open {
        session.close().await;
    }
    Err(match (unreachable, recorded) {
        (Some(e), Ok(id)) => {
            // Nothing was sent: the intent says nothing true.
            store.discard_change(id).await?;
            e
        }
        (Some(e), Err(_)) => e,
        (None, Err(e)) => not_sent(e),
        (None, Ok(_)) => Error::internal("unreachable: the change was journaled"),
    })
}

/// A write's batches on one account: each message's result kept by its intent's index (for
/// the change's report) and journaled with its batch.
struct Writes<'a> {
    store: &'a Store,
    change_id: i64,
    intents: &'a [Intent],
    results: &'a mut [Option<ItemResult>],
    /// The account's fence: a batch is journaled only while the account is still ours.
    fence: mailbroker_store::Fence,
    follow: &'a crate::change::Follow,
}

impl Writes<'_> {
    /// Journals `results` (of the batch of `members`) and keeps what the report needs of
    /// each (not the state read back, which only the journal and the index take).
    async fn put(&mut self, results: Vec<ItemResult>, members: &[usize]) -> Result<()> {
        tracing::debug!(results = results.len(), "write: batch answered");
        let at: HashMap<&mailbroker_core::RemoteId, usize> = members
            .iter()
            .enumerate()
            .map(|(at, i)| (&self.intents[*i].row.remote_id, at))
            .collect();
        let mut by_member: Vec<Option<ItemResult>> = vec![None; members.len()];
        for item in results {
            if let Some(at) = at.get(&item.id) {
                by_member[*at] = Some(item);
            }
        }
        let mut batch: Vec<(&Intent, JournalItem)> = Vec::with_capacity(members.len());
        for (i, result) in members.iter().zip(by_member) {
            let intent = &self.intents[*i];
            let result = result.unwrap_or_else(|| unchanged(intent));
            self.results[*i] = Some(reported(&result));
            batch.push((intent, journal_item(intent, result)));
        }
        let intended = as_intended(batch.iter().map(|(intent, item)| (*intent, item)));
        let items: Vec<JournalItem> = batch.into_iter().map(|(_, item)| item).collect();
        self.store
            .record_batch(self.change_id, &items, intended, &self.fence)
            .await?;
        self.follow.settle(members.len() as u64);
        Ok(())
    }

    fn ids<'b>(&'b self, members: &'b [usize]) -> impl Iterator<Item = &'b RemoteId> {
        members.iter().map(|i| &self.intents[*i].row.remote_id)
    }
}

#[async_trait::async_trait]
impl<'a> Batches for Writes<'a> {
    type Batch = (&'a Vec<usize>, &'a WriteBatch);

    async fn send(
        &mut self,
        provider: &mut dyn Provider,
        (_, batch): &Self::Batch,
    ) -> Result<Vec<ItemResult>> {
        provider.apply(batch).await
    }

    async fn record(
        &mut self,
        (members, _): &Self::Batch,
        sent: Result<Vec<ItemResult>>,
    ) -> Result<()> {
        let results = match sent {
            Ok(results) => results,
            Err(e) => failed_as_batch(self.ids(members), &e),
        };
        self.put(results, members).await
    }

    async fn skipped(&mut self, (members, _): &Self::Batch, cause: &Error) -> Result<()> {
        let e = Error::provider_unavailable(format!(
            "not attempted after an earlier failure: {}",
            cause.message()
        ));
        let results = failed_as_batch(self.ids(members), &e);
        self.put(results, members).await
    }
}
