//! An index in memory that takes a sync as the store does (`SyncSink`), for adapters' tests:
//! each message keeps the local id it got when first indexed, also when it moves; another
//! client's move is settled as the store settles it (by id, or by Message-ID and size); cursors are
//! kept. A test may act at the sync's checkpoints (`AtCheckpoint`), as a write waiting for
//! the account would.

use std::collections::{BTreeMap, HashMap, HashSet};

use async_trait::async_trait;
use mailbroker_core::{
    ApplyEach, Arrival, MailboxCursor, MailboxInfo, MessageFlags, MessageMeta, MessageText,
    RemoteId, Result, Role, SameMessage, Seen, Settled, SyncRequest, SyncSink, Version,
};

/// One indexed message: its local id and what the sync brought.
#[derive(Debug, Clone)]
pub struct Row {
    pub local: u64,
    pub meta: MessageMeta,
}

/// What the index holds.
#[derive(Debug, Default)]
pub struct Indexed {
    pub roles: BTreeMap<String, Option<Role>>,
    /// The provider's own mailbox ids (`MailboxInfo::remote`), by name.
    pub remotes: BTreeMap<String, String>,
    pub mailboxes: BTreeMap<String, BTreeMap<RemoteId, Row>>,
    pub cursors: BTreeMap<String, MailboxCursor>,
    /// The account-wide cursor the sync stored last.
    pub account_cursor: Option<String>,
    /// Checkpoints the sync passed.
    pub checkpoints: u64,
    next_local: u64,
}

impl Indexed {
    /// Where message `id` is: its mailbox and local id.
    pub fn local(&self, id: &str) -> Option<(String, u64)> {
        self.mailboxes.iter().find_map(|(name, m)| {
            m.get(&RemoteId::new(id))
                .map(|row| (name.clone(), row.local))
        })
    }

    /// What the index holds of message `id`.
    pub fn meta(&self, id: &str) -> Option<&MessageMeta> {
        self.mailboxes
            .values()
            .find_map(|m| m.get(&RemoteId::new(id)).map(|row| &row.meta))
    }

    /// The provider's own id of `mailbox`, where it has one.
    pub fn remote_of(&self, mailbox: &str) -> Option<String> {
        self.remotes.get(mailbox).cloned()
    }

    pub fn count(&self, mailbox: &str) -> usize {
        self.mailboxes.get(mailbox).map_or(0, BTreeMap::len)
    }

    /// A request to sync on from where this index stands.
    pub fn known(&self) -> SyncRequest {
        SyncRequest {
            full: false,
            known: self
                .cursors
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Inserts `meta` in `mailbox` under `local`, else the local id it has there, else a new
    /// one.
    pub fn insert(&mut self, mailbox: &str, local: Option<u64>, meta: MessageMeta) {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        let local = local
            .or_else(|| here.get(&meta.id).map(|row| row.local))
            .unwrap_or_else(|| {
                self.next_local += 1;
                self.next_local
            });
        here.insert(meta.id.clone(), Row { local, meta });
    }

    /// Moves message `id` (of any mailbox) to `mailbox`, keeping its local id.
    pub fn relocate(&mut self, id: &RemoteId, mailbox: &str) -> bool {
        let found = self.mailboxes.values_mut().find_map(|m| m.remove(id));
        match found {
            Some(row) => {
                self.insert(mailbox, Some(row.local), row.meta);
                true
            }
            None => false,
        }
    }
}

/// What a test does at a sync's checkpoint (a write waiting for the account runs there).
#[async_trait]
pub trait AtCheckpoint: Send {
    async fn at(&mut self, index: &mut Indexed) -> Result<()>;
}

/// The in-memory index; `SyncSink` for a sync to run into.
#[derive(Default)]
pub struct MemoryIndex {
    pub indexed: Indexed,
    at_checkpoint: Option<Box<dyn AtCheckpoint>>,
}

impl MemoryIndex {
    pub fn new() -> MemoryIndex {
        MemoryIndex::default()
    }

    /// The same index, running `hook` at every checkpoint of the syncs it takes.
    pub fn at_checkpoint(mut self, hook: impl AtCheckpoint + 'static) -> MemoryIndex {
        self.at_checkpoint = Some(Box::new(hook));
        self
    }
}

impl std::ops::Deref for MemoryIndex {
    type Target = Indexed;
    fn deref(&self) -> &Indexed {
        &self.indexed
    }
}

impl std::ops::DerefMut for MemoryIndex {
    fn deref_mut(&mut self) -> &mut Indexed {
        &mut self.indexed
    }
}

/// What each event does to the index in memory, as the store does it.
#[async_trait]
impl ApplyEach for MemoryIndex {
    async fn mailboxes(&mut self, list: &[MailboxInfo]) -> Result<()> {
        let names: HashSet<&str> = list.iter().map(|m| m.name.as_str()).collect();
        self.mailboxes.retain(|k, _| names.contains(k.as_str()));
        self.cursors.retain(|k, _| names.contains(k.as_str()));
        for m in list {
            self.indexed.roles.insert(m.name.clone(), m.role);
            if let Some(remote) = &m.remote {
                self.indexed.remotes.insert(m.name.clone(), remote.clone());
            }
            self.indexed.mailboxes.entry(m.name.clone()).or_default();
        }
        Ok(())
    }

    async fn reset_mailbox(&mut self, mailbox: &str) -> Result<()> {
        self.mailboxes.entry(mailbox.into()).or_default().clear();
        self.cursors.remove(mailbox);
        Ok(())
    }

    async fn upsert_messages(&mut self, mailbox: &str, messages: Vec<MessageMeta>) -> Result<()> {
        for m in messages {
            self.insert(mailbox, None, m);
        }
        Ok(())
    }

    async fn update_flags(
        &mut self,
        mailbox: &str,
        changes: Vec<(RemoteId, Version, MessageFlags)>,
    ) -> Result<u64> {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        let mut changed = 0;
        for (id, version, flags) in changes {
            if let Some(row) = here.get_mut(&id)
                && (row.meta.flags != flags || row.meta.version != version)
            {
                changed += u64::from(row.meta.flags != flags);
                row.meta.flags = flags;
                row.meta.version = version;
            }
        }
        Ok(changed)
    }

    async fn remove_messages(&mut self, mailbox: &str, ids: Vec<RemoteId>) -> Result<u64> {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        Ok(ids.iter().filter(|id| here.remove(id).is_some()).count() as u64)
    }

    async fn account_cursor(&mut self, cursor: &str) -> Result<()> {
        self.indexed.account_cursor = Some(cursor.to_string());
        Ok(())
    }

    async fn mailbox_done(&mut self, mailbox: &str, cursor: MailboxCursor) -> Result<()> {
        self.cursors.insert(mailbox.into(), cursor);
        Ok(())
    }

    async fn fill_text(&mut self, mailbox: &str, texts: Vec<MessageText>) -> Result<()> {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        for text in texts {
            if let Some(row) = here.get_mut(&text.id) {
                row.meta.has_attachments = text.has_attachments;
                row.meta.snippet = text.snippet;
                row.meta.text_pending = false;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl SyncSink for MemoryIndex {
    async fn apply(&mut self, seen: Seen) -> Result<u64> {
        self.apply_seen(seen).await
    }

    async fn indexed_except(
        &mut self,
        mailbox: &str,
        present: Vec<RemoteId>,
    ) -> Result<Vec<RemoteId>> {
        let present: HashSet<RemoteId> = present.into_iter().collect();
        Ok(self
            .mailboxes
            .get(mailbox)
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|id| !present.contains(*id))
            .cloned()
            .collect())
    }

    async fn known_elsewhere(
        &mut self,
        mailbox: &str,
        message_ids: Vec<String>,
    ) -> Result<HashSet<String>> {
        let held: HashSet<&str> = self
            .mailboxes
            .iter()
            .filter(|(name, _)| name.as_str() != mailbox)
            .flat_map(|(_, m)| m.values())
            .filter_map(|row| row.meta.message_id.as_deref())
            .collect();
        Ok(message_ids
            .into_iter()
            .filter(|id| held.contains(id.as_str()))
            .collect())
    }

    /// As the store settles them: an arrival recognised by id takes the row with that id
    /// from another mailbox; one recognised by content takes a departed row only where they
    /// alone share a Message-ID and size; the other departures are removed.
    async fn settle_moves(
        &mut self,
        departures: Vec<(String, Vec<RemoteId>)>,
        arrivals: Vec<(String, Vec<Arrival>)>,
    ) -> Result<Vec<Settled>> {
        let mut settled: BTreeMap<String, Settled> = BTreeMap::new();
        let mut leaving: HashMap<String, Vec<(String, Row)>> = HashMap::new();
        for (mailbox, ids) in departures {
            for id in ids {
                let Some(row) = self.mailboxes.get_mut(&mailbox).and_then(|m| m.remove(&id)) else {
                    continue;
                };
                match row.meta.message_id.clone() {
                    Some(mid) => leaving.entry(mid).or_default().push((mailbox.clone(), row)),
                    None => settled.entry(mailbox.clone()).or_default().removed += 1,
                }
            }
        }
        let mut twins: HashMap<(String, Option<u64>), usize> = HashMap::new();
        for arrival in arrivals.iter().flat_map(|(_, list)| list) {
            if let SameMessage::Content { message_id, size } = &arrival.same {
                *twins.entry((message_id.clone(), *size)).or_default() += 1;
            }
        }
        for (mailbox, list) in arrivals {
            for arrival in list {
                let row = match &arrival.same {
                    SameMessage::Id => self
                        .mailboxes
                        .iter_mut()
                        .filter(|(name, _)| **name != mailbox)
                        .find_map(|(_, rows)| rows.remove(&arrival.id)),
                    SameMessage::Content { message_id, size } => {
                        let alone = twins[&(message_id.clone(), *size)] == 1;
                        let rows = leaving.get_mut(message_id).filter(|_| alone);
                        rows.and_then(|rows| {
                            let fits = |r: &(String, Row)| size.is_none_or(|s| s == r.1.meta.size);
                            let fitting: Vec<usize> =
                                (0..rows.len()).filter(|i| fits(&rows[*i])).collect();
                            match fitting.as_slice() {
                                [one] => Some(rows.remove(*one).1),
                                _ => None,
                            }
                        })
                    }
                };
                let entry = settled.entry(mailbox.clone()).or_default();
                match row {
                    Some(mut row) => {
                        row.meta.id = arrival.id;
                        row.meta.version = arrival.version;
                        row.meta.flags = arrival.flags;
                        self.indexed.insert(&mailbox, Some(row.local), row.meta);
                        entry.moved_in += 1;
                    }
                    None => entry.unmatched.push(arrival.id),
                }
            }
        }
        for (mailbox, _) in leaving.into_values().flatten() {
            settled.entry(mailbox).or_default().removed += 1;
        }
        Ok(settled
            .into_iter()
            .map(|(mailbox, s)| Settled { mailbox, ..s })
            .collect())
    }

    async fn indexed_ids(&mut self) -> Result<Vec<RemoteId>> {
        Ok(self
            .mailboxes
            .values()
            .flat_map(|m| m.keys().cloned())
            .collect())
    }

    async fn text_pending(&mut self, mailbox: &str) -> Result<Vec<RemoteId>> {
        let mut pending: Vec<(u64, RemoteId)> = self
            .mailboxes
            .get(mailbox)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|row| row.meta.text_pending)
            .map(|row| (row.local, row.meta.id.clone()))
            .collect();
        pending.sort();
        Ok(pending.into_iter().map(|(_, id)| id).collect())
    }

    async fn checkpoint(&mut self) -> Result<()> {
        self.indexed.checkpoints += 1;
        match self.at_checkpoint.as_mut() {
            Some(hook) => hook.at(&mut self.indexed).await,
            None => Ok(()),
        }
    }
}
