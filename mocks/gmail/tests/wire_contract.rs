//! The wire contract, shown once with requests that are wrong on purpose: the mock refuses
//! what Gmail's discovery document does not allow (a query parameter, a body field, a path,
//! a scope) with Google's errors, records the undocumented ones, and a mock that saw one
//! fails its test when dropped, which is how every Gmail test in the suite is held to the
//! document.

use mailbroker_mock_gmail::{GmailMock, SCOPE_MODIFY};
use serde_json::{Value, json};

async fn send(req: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
    let resp = req.bearer_auth(token).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn what_the_discovery_document_lacks_is_refused_and_fails_the_test() {
    let mock = GmailMock::start("me@gmail.example").await.unwrap();
    let ids = mock.seed(2, &["INBOX"], None);
    let token = mock.token(&[SCOPE_MODIFY]);
    let http = reqwest::Client::new();
    let user = format!("{}/gmail/v1/users/me", mock.url);

    // What the document has passes.
    let listed = http.get(format!("{user}/messages")).query(&[
        ("labelIds", "INBOX"),
        ("maxResults", "10"),
        ("alt", "json"),
    ]);
    let (status, body) = send(listed, &token).await;
    assert_eq!(status, 200, "{body}");

    // An unknown query parameter, as Google words it.
    let unknown = http
        .get(format!("{user}/messages"))
        .query(&[("labelIds", "INBOX"), ("label", "INBOX")]);
    let (status, body) = send(unknown, &token).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["status"], "BAD_REQUEST");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"label\": Cannot bind query parameter"),
        "{body}"
    );
    // A value outside a parameter's enum.
    let get = http
        .get(format!("{user}/messages/{}", ids[0]))
        .query(&[("format", "headers")]);
    assert_eq!(send(get, &token).await.0, 400);

    // A body field the request schema lacks; nothing is applied.
    let modify = http
        .post(format!("{user}/messages/batchModify"))
        .json(&json!({"ids": ids, "addLabelIds": ["STARRED"], "markRead": true}));
    let (status, body) = send(modify, &token).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"markRead\""),
        "{body}"
    );
    assert!(mock.ids_with(Some("STARRED")).is_empty());

    // A path that is none of Gmail's methods.
    let (status, _) = send(
        http.get(format!("{user}/messages/{}/labels", ids[0])),
        &token,
    )
    .await;
    assert_eq!(status, 404);

    // A scope the method does not list: refused, but a grant too small is the person's
    // choice, not an undocumented request, so it is not recorded.
    let delete = http
        .post(format!("{user}/messages/batchDelete"))
        .json(&json!({"ids": [ids[0]]}));
    let (status, body) = send(delete, &token).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"]["errors"][0]["reason"],
        "insufficientPermissions"
    );
    assert_eq!(mock.ids_with(None).len(), 2);

    let seen = mock.wire().seen();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    assert!(seen[0].contains("\"label\""), "{seen:#?}");
    assert!(seen[2].contains("markRead"), "{seen:#?}");
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(mock)));
    let message = failed.expect_err("dropping a mock that saw undocumented requests fails");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("markRead"), "{message}");
}
