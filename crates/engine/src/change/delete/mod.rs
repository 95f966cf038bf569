//! Staged deletion (SPEC §5): an assistant or a person stages a manifest; only a person runs
//! it with `mailbroker delete-staged` (`Operation::Run`). Execution goes batch by batch
//! through the provider trait, checkpointing after each batch, so a run killed at any moment
//! resumes where it stopped: nothing lost, nothing deleted twice.

mod run;

pub use run::{Ready, execute, resolve};

use crate::registry::AccountAdapter;
use std::collections::{BTreeMap, HashMap};

use mailbroker_core::{
    AccountId, DeleteBatch, DeleteMode, Error, MessageFlags, Operation, Result, Version,
    WriteTarget,
};

use mailbroker_store::{Manifest, ManifestItem, ManifestStatus, MessageRef, Store};

/// The most messages one manifest may hold (SPEC §5).
pub const MAX_MESSAGES: usize = 100_000;
/// Messages per provider batch (and per checkpoint).
pub const DEFAULT_BATCH: usize = 1000;

/// Records a manifest of `rows`; changes nothing on any server or in the index.
pub async fn stage(
    store: &Store,
    origin: &str,
    selection: &mailbroker_store::Chosen,
    rows: &[MessageRef],
    mode: DeleteMode,
    limit: usize,
) -> Result<Manifest> {
    check_size(rows.len(), limit)?;
    // A deletion its accounts cannot carry out is refused now, not when a person runs it.
    let accounts: std::collections::BTreeSet<&AccountId> =
        rows.iter().map(|r| &r.account).collect();
    for account in accounts {
        let record = store.account(account).await?;
        record
            .adapter()?
            .check(&record.info(), Operation::Delete(mode))?;
    }
    store.stage_manifest(origin, selection, mode, rows).await
}

/// Refuses an empty selection or one over `limit` (capped at `MAX_MESSAGES`).
pub fn check_size(count: usize, limit: usize) -> Result<()> {
    let limit = limit.min(MAX_MESSAGES);
    if count == 0 {
        return Err(Error::not_found("no message matches; nothing to stage")
            .with_next_step("check the query with: mailbroker search QUERY"));
    }
    if count > limit {
        return Err(Error::limit_exceeded(format!(
            "{count} messages match, more than one manifest may hold ({limit}); nothing was staged"
        ))
        .with_next_step(
            "narrow the query, e.g. with before:, in: or account:, and stage in parts",
        ));
    }
    Ok(())
}

/// (account, mailbox)
pub(super) type Place = (AccountId, String);

/// Pending items per account, then per mailbox, in batches.
pub(super) type Pending = BTreeMap<AccountId, Vec<(Place, Vec<ManifestItem>)>>;

pub(super) fn in_batches(items: Vec<ManifestItem>, size: usize) -> Pending {
    let mut places: BTreeMap<Place, Vec<ManifestItem>> = BTreeMap::new();
    for item in items {
        let place = (item.account.clone(), item.mailbox.clone());
        places.entry(place).or_default().push(item);
    }
    let mut out = Pending::new();
    for (place, items) in places {
        for chunk in items.chunks(size.max(1)) {
            out.entry(place.0.clone())
                .or_default()
                .push((place.clone(), chunk.to_vec()));
        }
    }
    out
}

/// The account's trash, where it has a mailbox with that role.
pub(super) fn trash_of(mailboxes: &mailbroker_store::Mailboxes) -> Option<String> {
    mailboxes
        .resolve("trash")
        .ok()
        .filter(|(_, role)| *role == Some(mailbroker_core::Role::Trash))
        .map(|(name, _)| name)
}

/// A provider batch of these items, each with the state the index last saw (`indexed`).
pub(super) fn batch_of(
    place: &Place,
    items: &[ManifestItem],
    indexed: &HashMap<i64, MessageRef>,
    mode: DeleteMode,
    trash: Option<String>,
) -> DeleteBatch {
    // What is deleted is the message as staged (its id then), with the index's state.
    let targets = items
        .iter()
        .map(|i| match indexed.get(&i.message_id) {
            Some(row) => WriteTarget {
                id: i.remote_id.clone(),
                ..super::update::target_of(row)
            },
            None => WriteTarget {
                id: i.remote_id.clone(),
                version: Version::default(),
                message_id: None,
                size: None,
                flags: MessageFlags::default(),
            },
        })
        .collect();
    DeleteBatch {
        folders: Default::default(),
        mailbox: place.1.clone(),
        mode,
        trash,
        targets,
    }
}

/// How a run tells its progress: (items finished, items in the manifest).
#[derive(Clone, Default)]
pub struct Progress(Option<std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>>);

impl Progress {
    pub fn new(f: impl Fn(u64, u64) + Send + Sync + 'static) -> Progress {
        Progress(Some(std::sync::Arc::new(f)))
    }

    fn tell(&self, finished: u64, total: u64) {
        if let Some(f) = &self.0 {
            f(finished, total);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// Cancels a manifest that has not finished; its remaining items will never run.
pub async fn cancel(store: &Store, id: i64) -> Result<Manifest> {
    let manifest = store.manifest(id, false).await?;
    if matches!(
        manifest.status,
        ManifestStatus::Done | ManifestStatus::Cancelled
    ) {
        return Err(Error::validation(format!(
            "manifest {id} is {} and cannot be cancelled",
            manifest.status
        )));
    }
    store
        .set_manifest_status(id, ManifestStatus::Cancelled)
        .await?;
    store.manifest(id, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_holds_at_most_100000_messages() {
        check_size(MAX_MESSAGES, MAX_MESSAGES).unwrap();
        let over = check_size(MAX_MESSAGES + 1, MAX_MESSAGES).unwrap_err();
        assert_eq!(over.error_type(), "limit_exceeded");
        assert!(over.next_step().is_some());
        // A caller's lower limit applies; a higher one is capped.
        assert!(check_size(3, 2).is_err());
        assert!(check_size(MAX_MESSAGES + 1, usize::MAX).is_err());
        assert_eq!(check_size(0, 10).unwrap_err().error_type(), "not_found");
    }
}
