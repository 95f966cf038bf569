//! Sync against the Graph mock through an in-memory sink: 5,000 messages across nested
//! folders, then exactly the changes made in the mock (a category, read, flagged, a move, a
//! deletion) by delta, a moved message keeping its row, and a voided delta link forcing a
//! full resync of its folder.

use std::collections::{BTreeMap, HashMap, HashSet};

use async_trait::async_trait;
use mailbroker_core::{
    Arrival, Error, MailboxCursor, MailboxInfo, MessageFlags, MessageMeta, MessageText, Provider,
    RemoteId, Result, Role, Settled, SyncMode, SyncRequest, SyncSink, Version,
};
use mailbroker_graph::GraphProvider;
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::oauth::control;
use serde_json::json;

/// The index as a sink sees it: per mailbox, each message with the local id it got when
/// first indexed (kept when it moves, as the store keeps its row).
#[derive(Default)]
struct Index {
    roles: BTreeMap<String, Option<Role>>,
    mailboxes: BTreeMap<String, BTreeMap<RemoteId, (u64, MessageMeta)>>,
    cursors: HashMap<String, MailboxCursor>,
    next_local: u64,
    /// At a checkpoint, a write (an undo) moves this message from Archive back to the
    /// Inbox, on the mock and in the index: (mock URL, message id).
    undo_at_checkpoint: Option<(String, String)>,
}

impl Index {
    fn local(&self, id: &str) -> Option<(String, u64)> {
        self.mailboxes.iter().find_map(|(name, m)| {
            m.get(&RemoteId::new(id))
                .map(|(local, _)| (name.clone(), *local))
        })
    }

    fn meta(&self, id: &str) -> Option<&MessageMeta> {
        self.mailboxes
            .values()
            .find_map(|m| m.get(&RemoteId::new(id)).map(|(_, meta)| meta))
    }

    /// Inserts `m` in `mailbox` under `local`, else the local id it has there, else a new one.
    fn insert(&mut self, mailbox: &str, local: Option<u64>, m: MessageMeta) {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        let local = local
            .or_else(|| here.get(&m.id).map(|(l, _)| *l))
            .unwrap_or_else(|| {
                self.next_local += 1;
                self.next_local
            });
        here.insert(m.id.clone(), (local, m));
    }

    fn count(&self, mailbox: &str) -> usize {
        self.mailboxes.get(mailbox).map_or(0, BTreeMap::len)
    }

    fn known(&self) -> SyncRequest {
        SyncRequest {
            full: false,
            known: self
                .cursors
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

#[async_trait]
impl SyncSink for Index {
    async fn mailboxes(&mut self, list: &[MailboxInfo]) -> Result<()> {
        let names: HashSet<&str> = list.iter().map(|m| m.name.as_str()).collect();
        self.mailboxes.retain(|k, _| names.contains(k.as_str()));
        for m in list {
            self.roles.insert(m.name.clone(), m.role);
            self.mailboxes.entry(m.name.clone()).or_default();
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
        _: &str,
        _: Vec<(RemoteId, Version, MessageFlags)>,
    ) -> Result<u64> {
        Err(Error::internal("graph sync updates by delta items"))
    }
    async fn remove_messages(&mut self, mailbox: &str, ids: Vec<RemoteId>) -> Result<u64> {
        let here = self.mailboxes.entry(mailbox.into()).or_default();
        Ok(ids.iter().filter(|id| here.remove(id).is_some()).count() as u64)
    }
    async fn indexed_except(&mut self, _: &str, _: Vec<RemoteId>) -> Result<Vec<RemoteId>> {
        Err(Error::internal("not used by graph"))
    }
    async fn known_elsewhere(&mut self, _: &str, _: Vec<String>) -> Result<HashSet<String>> {
        Err(Error::internal("not used by graph"))
    }
    async fn settle_moves(
        &mut self,
        _: Vec<(String, Vec<RemoteId>)>,
        _: Vec<(String, Vec<Arrival>)>,
    ) -> Result<Vec<Settled>> {
        Err(Error::internal("not used by graph"))
    }
    async fn place_messages(&mut self, mailbox: &str, messages: Vec<MessageMeta>) -> Result<()> {
        for m in messages {
            // Moved here: the row leaves its old mailbox with its local id.
            let moved = self
                .mailboxes
                .iter_mut()
                .filter(|(name, _)| name.as_str() != mailbox)
                .find_map(|(_, list)| list.remove(&m.id).map(|(local, _)| local));
            self.insert(mailbox, moved, m);
        }
        Ok(())
    }
    async fn indexed_ids(&mut self) -> Result<Vec<RemoteId>> {
        Ok(self
            .mailboxes
            .values()
            .flat_map(|m| m.keys().cloned())
            .collect())
    }
    async fn account_cursor(&mut self, _: &str) -> Result<()> {
        Ok(())
    }
    async fn mailbox_done(&mut self, mailbox: &str, cursor: MailboxCursor) -> Result<()> {
        self.cursors.insert(mailbox.into(), cursor);
        Ok(())
    }
    async fn text_pending(&mut self, _: &str) -> Result<Vec<RemoteId>> {
        Ok(Vec::new())
    }
    async fn fill_text(&mut self, _: &str, _: Vec<MessageText>) -> Result<()> {
        Ok(())
    }
    async fn checkpoint(&mut self) -> Result<()> {
        let Some((url, id)) = self.undo_at_checkpoint.clone() else {
            return Ok(());
        };
        let Some(("Archive", local)) = self.local(&id).as_ref().map(|(m, l)| (m.as_str(), *l))
        else {
            return Ok(());
        };
        control(&url, "modify", json!({"id": id, "moveTo": "inbox"})).await;
        let row = self
            .mailboxes
            .get_mut("Archive")
            .and_then(|m| m.remove(&RemoteId::new(&id)));
        if let Some((_, meta)) = row {
            self.insert("Inbox", Some(local), meta);
        }
        self.undo_at_checkpoint = None;
        Ok(())
    }
}

async fn sync(
    mock: &GraphMock,
    index: &mut Index,
    request: SyncRequest,
) -> Vec<(String, SyncMode, u64, u64, u64)> {
    let mut graph = GraphProvider::new(&mock.url, mock.token(), "g").unwrap();
    let reports = graph.sync(&request, index).await.unwrap();
    reports
        .into_iter()
        .map(|r| (r.mailbox, r.mode, r.added, r.changed, r.removed))
        .collect()
}

fn report<'a>(
    reports: &'a [(String, SyncMode, u64, u64, u64)],
    mailbox: &str,
) -> &'a (String, SyncMode, u64, u64, u64) {
    reports.iter().find(|r| r.0 == mailbox).unwrap()
}

#[tokio::test]
async fn a_write_at_a_checkpoint_is_not_undone_by_a_removal_read_before_it() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let inbox = mock.seed(5, "inbox", "news@shop.example", true);
    let mut index = Index::default();
    sync(&mock, &mut index, SyncRequest::default()).await;
    // Another client moves a message to Archive; while the sync that sees it runs, an undo
    // moves it back wherever the sync lets a write in.
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[2], "moveTo": "archive"}),
    )
    .await;
    index.undo_at_checkpoint = Some((mock.url.clone(), inbox[2].clone()));
    let known = index.known();
    sync(&mock, &mut index, known).await;
    let place = if mock.ids_in("inbox").contains(&inbox[2]) {
        "Inbox"
    } else {
        "Archive"
    };
    assert_eq!(
        index.local(&inbox[2]).map(|(m, _)| m),
        Some(place.to_string()),
        "the index has the message where the server has it"
    );
}

#[tokio::test]
async fn delta_sync_keeps_the_index_exact_across_nested_folders() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let receipts = mock.add_folder("Receipts", Some("inbox")).unwrap();
    let year = mock.add_folder("2026", Some(&receipts)).unwrap();
    let inbox = mock.seed(3000, "inbox", "news@shop.example", true);
    let filed = mock.seed(1500, &receipts, "billing@acme.example", false);
    mock.seed(500, &year, "billing@acme.example", false);

    let mut index = Index::default();
    let first = sync(&mock, &mut index, SyncRequest::default()).await;
    assert_eq!(index.count("Inbox"), 3000);
    assert_eq!(index.count("Inbox/Receipts"), 1500);
    assert_eq!(index.count("Inbox/Receipts/2026"), 500);
    assert_eq!(report(&first, "Inbox").1, SyncMode::Full);
    assert_eq!(report(&first, "Inbox").2, 3000);
    assert_eq!(index.roles["Deleted Items"], Some(Role::Trash));
    assert_eq!(index.roles["Junk Email"], Some(Role::Junk));
    assert_eq!(index.roles["Inbox/Receipts"], None);
    let moved_local = index.local(&inbox[3]).unwrap().1;

    // Another client: a category, read, flagged, a move, a deletion.
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[0], "categories": ["Work"]}),
    )
    .await;
    control(&mock.url, "modify", json!({"id": inbox[1], "isRead": true})).await;
    control(
        &mock.url,
        "modify",
        json!({"id": filed[0], "flag": "flagged"}),
    )
    .await;
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[3], "moveTo": "archive"}),
    )
    .await;
    control(&mock.url, "modify", json!({"id": inbox[4], "delete": true})).await;

    let known = index.known();
    let second = sync(&mock, &mut index, known).await;
    let inbox_report = report(&second, "Inbox");
    // Two changed; of the two that left, the moved one is not removed but placed in Archive.
    assert_eq!(
        (inbox_report.1, inbox_report.3, inbox_report.4),
        (SyncMode::Delta, 2, 1)
    );
    assert_eq!(report(&second, "Archive").3, 1);
    assert_eq!(
        report(&second, "Inbox/Receipts/2026").1,
        SyncMode::Unchanged
    );
    assert_eq!(index.meta(&inbox[0]).unwrap().flags.tags, vec!["Work"]);
    assert!(index.meta(&inbox[1]).unwrap().flags.read);
    assert!(index.meta(&filed[0]).unwrap().flags.flagged);
    assert_eq!(
        index.local(&inbox[3]),
        Some(("Archive".to_string(), moved_local)),
        "moved, the row kept"
    );
    assert!(index.meta(&inbox[4]).is_none());
    assert_eq!(index.count("Inbox"), 2998);

    // A voided link: that folder (and every other) is listed in full again, and the index
    // ends as the mock is.
    control(&mock.url, "expire-delta", json!({})).await;
    let known = index.known();
    let third = sync(&mock, &mut index, known).await;
    assert_eq!(report(&third, "Inbox").1, SyncMode::Full);
    assert_eq!(report(&third, "Inbox").2, 2998);
    for (folder, name) in [
        ("inbox", "Inbox"),
        (receipts.as_str(), "Inbox/Receipts"),
        ("archive", "Archive"),
    ] {
        let mut want = mock.ids_in(folder);
        want.sort();
        let have: Vec<String> = index.mailboxes[name]
            .keys()
            .map(|k| k.as_str().to_string())
            .collect();
        assert_eq!(have, want, "{name}");
    }
}
