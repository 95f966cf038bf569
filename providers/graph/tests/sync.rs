//! Sync against the Graph mock through an in-memory sink: 5,000 messages across nested
//! folders, then exactly the changes made in the mock (a category, read, flagged, a move, a
//! deletion) by delta, a moved message keeping its row, and a voided delta link forcing a
//! full resync of its folder.

use async_trait::async_trait;
use mailbroker_core::{Provider, RemoteId, Result, Role, SyncMode, SyncRequest};
use mailbroker_graph::GraphProvider;
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::memory::{AtCheckpoint, Indexed, MemoryIndex};
use mailbroker_testkit::oauth::control;
use serde_json::json;

/// At a checkpoint, a write (an undo) moves this message from Archive back to the Inbox, on
/// the mock and in the index: (mock URL, message id).
struct UndoAtCheckpoint(Option<(String, String)>);

#[async_trait]
impl AtCheckpoint for UndoAtCheckpoint {
    async fn at(&mut self, index: &mut Indexed) -> Result<()> {
        let Some((url, id)) = self.0.clone() else {
            return Ok(());
        };
        if index.local(&id).map(|(m, _)| m).as_deref() != Some("Archive") {
            return Ok(());
        }
        control(&url, "modify", json!({"id": id, "moveTo": "inbox"})).await;
        index.relocate(&RemoteId::new(&id), "Inbox");
        self.0 = None;
        Ok(())
    }
}

async fn sync(
    mock: &GraphMock,
    index: &mut MemoryIndex,
    request: SyncRequest,
) -> Vec<(String, SyncMode, u64, u64, u64, bool)> {
    let mut graph = GraphProvider::new(&mock.url, mock.token(), "g").unwrap();
    let reports = graph.sync(&request, index).await.unwrap();
    reports
        .into_iter()
        .map(|r| {
            (
                r.mailbox,
                r.mode,
                r.added,
                r.changed,
                r.removed,
                r.cursor_voided,
            )
        })
        .collect()
}

fn report<'a>(
    reports: &'a [(String, SyncMode, u64, u64, u64, bool)],
    mailbox: &str,
) -> &'a (String, SyncMode, u64, u64, u64, bool) {
    reports.iter().find(|r| r.0 == mailbox).unwrap()
}

#[tokio::test]
async fn a_write_at_a_checkpoint_is_not_undone_by_a_removal_read_before_it() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let inbox = mock.seed(5, "inbox", "news@shop.example", true);
    let undo = UndoAtCheckpoint(Some((mock.url.clone(), inbox[2].clone())));
    let mut index = MemoryIndex::new();
    sync(&mock, &mut index, SyncRequest::default()).await;
    // Another client moves a message to Archive; while the sync that sees it runs, an undo
    // moves it back wherever the sync lets a write in.
    control(
        &mock.url,
        "modify",
        json!({"id": inbox[2], "moveTo": "archive"}),
    )
    .await;
    let mut index = std::mem::take(&mut index).at_checkpoint(undo);
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

    let mut index = MemoryIndex::new();
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
    assert!(report(&third, "Inbox").5, "the voided link is reported");
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
