//! The Cyrus harness serves real JMAP: a user with roles on the special folders, and
//! messages seeded through `Email/set`.

use serde_json::json;

#[tokio::test]
async fn a_user_gets_folders_with_roles_and_seeded_mail() {
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    cyrus.add_user("alice").await.unwrap();
    let ids = cyrus
        .seed("alice", "Inbox", 20, "bob@example.test", &["$seen"])
        .await
        .unwrap();
    assert_eq!(ids.len(), 20);
    let got = cyrus
        .call(
            "alice",
            json!([
                ["Mailbox/get", { "accountId": "alice", "properties": ["name", "role", "totalEmails"] }, "m"],
                ["Email/query", { "accountId": "alice" }, "q"],
            ]),
        )
        .await
        .unwrap();
    let boxes = got[0][1]["list"].as_array().unwrap();
    let role = |name: &str| {
        boxes
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["role"].clone())
    };
    assert_eq!(role("Inbox"), Some(json!("inbox")), "{got}");
    assert_eq!(role("Trash"), Some(json!("trash")), "{got}");
    assert_eq!(role("Archive"), Some(json!("archive")), "{got}");
    assert_eq!(got[1][1]["ids"].as_array().unwrap().len(), 20, "{got}");
}
