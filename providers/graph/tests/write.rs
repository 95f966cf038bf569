//! Graph writes as a session sees them, against the mock: a category another client (or an
//! earlier run whose answer was lost) created after this session read the list is taken as
//! there, not refused.

use mailbroker_core::{
    FlagOp, MailboxCursor, MessageFlags, Outcome, Provider, RemoteId, Version, WriteBatch,
    WriteTarget,
};
use mailbroker_graph::GraphProvider;
use mailbroker_mock_graph::GraphMock;

fn add_tag(mock: &GraphMock, id: &str, tag: &str) -> WriteBatch {
    let message = mock.message(id).unwrap();
    WriteBatch {
        mailbox: "Inbox".into(),
        synced: MailboxCursor::default(),
        op: FlagOp {
            add_tags: vec![tag.to_string()],
            ..FlagOp::default()
        },
        move_to: None,
        move_synced: MailboxCursor::default(),
        folders: Default::default(),
        targets: vec![WriteTarget {
            id: RemoteId::new(id),
            version: Version::new(message["changeKey"].as_str().unwrap()),
            message_id: None,
            size: None,
            flags: MessageFlags::default(),
        }],
    }
}

#[tokio::test]
async fn a_category_created_since_the_list_was_read_is_used_not_refused() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(3, "inbox", "news@shop.example", true);
    let session = || {
        GraphProvider::new(&mock.url, mock.token(), "m")
            .unwrap()
            .with_category_list(true)
    };
    let (mut first, mut second) = (session(), session());
    // Both sessions read the category list (neither has "Shared" yet).
    let a = second.apply(&add_tag(&mock, &ids[0], "Own")).await.unwrap();
    assert_eq!(a[0].outcome, Outcome::Applied);
    let b = first
        .apply(&add_tag(&mock, &ids[1], "Shared"))
        .await
        .unwrap();
    assert_eq!(b[0].outcome, Outcome::Applied);
    // The second session's list is stale: its create is refused (409) and re-read.
    let c = second
        .apply(&add_tag(&mock, &ids[2], "Shared"))
        .await
        .unwrap();
    assert_eq!(c[0].outcome, Outcome::Applied, "{c:?}");
    assert_eq!(
        mock.message(&ids[2]).unwrap()["categories"],
        serde_json::json!(["Shared"])
    );
    let creates = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("masterCategories"))
        .map(|r| r.status)
        .collect::<Vec<_>>();
    assert_eq!(creates, [201, 201, 409]);
}

/// Exchange compares category names case-blind beyond ASCII: `ÉTÉ` and `été` are one. After
/// a 409 the name was looked for ASCII-case-blind, not found, and the write failed.
#[tokio::test]
async fn a_category_that_differs_only_in_accented_case_is_the_same_category() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let ids = mock.seed(2, "inbox", "news@shop.example", true);
    let session = || {
        GraphProvider::new(&mock.url, mock.token(), "m")
            .unwrap()
            .with_category_list(true)
    };
    let (mut first, mut second) = (session(), session());
    // The second session reads the list before the first adds to it.
    let warm = second
        .apply(&add_tag(&mock, &ids[0], "Warm"))
        .await
        .unwrap();
    assert_eq!(warm[0].outcome, Outcome::Applied);
    first.apply(&add_tag(&mock, &ids[0], "été")).await.unwrap();
    let upper = second.apply(&add_tag(&mock, &ids[1], "ÉTÉ")).await.unwrap();
    assert_eq!(upper[0].outcome, Outcome::Applied, "{upper:?}");
    // The 409 told the session the category exists: it does not try to add it again.
    second.apply(&add_tag(&mock, &ids[0], "ÉTÉ")).await.unwrap();
    let creates = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("masterCategories"))
        .map(|r| r.status)
        .collect::<Vec<_>>();
    assert_eq!(creates, [201, 201, 409], "Warm, été, then ÉTÉ once");
    let names = mock.category_names();
    assert_eq!(
        names.iter().filter(|n| n.to_lowercase() == "été").count(),
        1,
        "{names:?}"
    );
}
