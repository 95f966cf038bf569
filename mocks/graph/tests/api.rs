//! The mock's Graph behaviour over HTTP, as a client meets it: folders, delta paging and
//! links, PATCH preconditions and list semantics, moves and ids, permanent deletion,
//! categories and `$batch` limits; the device code flow, refresh and revocation; faults.

use mailbroker_mock_graph::GraphMock;
use serde_json::{Value, json};

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn new(mock: &GraphMock) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: format!("{}/v1.0", mock.url),
            token: mock.token(),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.bearer_auth(&self.token).send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    async fn get(&self, url: &str) -> (u16, Value) {
        let url = match url.starts_with("http") {
            true => url.to_string(),
            false => format!("{}{url}", self.base),
        };
        self.send(self.http.get(url).header("Prefer", "odata.maxpagesize=10"))
            .await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        self.send(self.http.post(url).json(&body)).await
    }

    async fn patch(&self, id: &str, body: Value, if_match: Option<&str>) -> (u16, Value) {
        let mut req = self
            .http
            .patch(format!("{}/me/messages/{id}", self.base))
            .json(&body);
        if let Some(key) = if_match {
            req = req.header("If-Match", key);
        }
        self.send(req).await
    }

    /// Follows a delta from `url` to its delta link: (items, delta link, pages).
    async fn delta(&self, url: &str) -> (Vec<Value>, String, usize) {
        let (mut items, mut pages, mut next) = (Vec::new(), 0, url.to_string());
        loop {
            let (status, page) = self.get(&next).await;
            assert_eq!(status, 200, "{page}");
            pages += 1;
            items.extend(page["value"].as_array().unwrap().iter().cloned());
            match (
                page["@odata.nextLink"].as_str(),
                page["@odata.deltaLink"].as_str(),
            ) {
                (Some(n), _) => next = n.to_string(),
                (None, Some(d)) => return (items, d.to_string(), pages),
                _ => panic!("a page without a link: {page}"),
            }
        }
    }
}

fn ids(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .filter(|i| i.get("@removed").is_none())
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn removed(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .filter(|i| i.get("@removed").is_some())
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn folders_are_listed_nested_and_by_well_known_name() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let (_, top) = api.get("/me/mailFolders").await;
    let names: Vec<&str> = top["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["displayName"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 6, "{top}");
    assert!(names.contains(&"Deleted Items") && names.contains(&"Junk Email"));
    let (status, made) = api
        .post(
            "/me/mailFolders/inbox/childFolders",
            json!({"displayName": "Receipts"}),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let (_, inbox) = api.get("/me/mailFolders/inbox").await;
    assert_eq!(inbox["childFolderCount"], 1);
    assert_eq!(made["parentFolderId"], inbox["id"]);
    let (_, children) = api.get("/me/mailFolders/inbox/childFolders").await;
    assert_eq!(children["value"][0]["displayName"], "Receipts");
    let (_, me) = api.get("/me").await;
    assert_eq!(me["mail"], "me@mock.example");
}

/// A first delta pages to a delta link; mail arriving while a client pages is listed by the
/// next delta, with what changed, moved out and was deleted; a voided link gets 410.
#[tokio::test]
async fn delta_pages_and_picks_up_every_kind_of_change() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let seeded = mock.seed(25, "inbox", "a@example.test", true);
    let start = format!(
        "{}/me/mailFolders/inbox/messages/delta()?$select=isRead,categories",
        api.base
    );
    let (_, first) = api.get(&start).await;
    assert_eq!(first["value"].as_array().unwrap().len(), 10);
    assert!(
        first["value"][0].get("subject").is_none(),
        "only what $select names"
    );
    let arrived = mock.seed(3, "inbox", "b@example.test", true);
    let (rest, link, pages) = api.delta(first["@odata.nextLink"].as_str().unwrap()).await;
    let mut all = first["value"].as_array().unwrap().clone();
    all.extend(rest);
    assert_eq!(
        (ids(&all).len(), pages),
        (25, 2),
        "the run lists the folder as it began"
    );
    let mut expected = seeded.clone();
    expected.sort();
    assert_eq!(ids(&all), expected);

    let (status, _) = api.patch(&seeded[0], json!({"isRead": true}), None).await;
    assert_eq!(status, 200);
    mock_modify(&mock, json!({"id": seeded[1], "moveTo": "archive"})).await;
    mock_modify(&mock, json!({"id": seeded[2], "delete": true})).await;
    let (next, link2, _) = api.delta(&link).await;
    let mut changed = arrived.clone();
    changed.push(seeded[0].clone());
    changed.sort();
    assert_eq!(ids(&next), changed);
    let mut gone = vec![seeded[1].clone(), seeded[2].clone()];
    gone.sort();
    assert_eq!(removed(&next), gone);
    let read = next.iter().find(|m| m["id"] == seeded[0].as_str()).unwrap();
    assert_eq!(read["isRead"], true);

    let (quiet, _, _) = api.delta(&link2).await;
    assert!(quiet.is_empty(), "{quiet:?}");
    mock_modify(&mock, json!({"id": seeded[3], "isRead": true})).await;
    let expired = api
        .http
        .post(format!("{}/_mock/expire-delta", mock.url))
        .send()
        .await;
    assert!(expired.is_ok());
    let (status, gone) = api.get(&link2).await;
    assert_eq!(status, 410, "{gone}");
    assert_eq!(gone["error"]["code"], "SyncStateNotFound");
}

async fn mock_modify(mock: &GraphMock, change: Value) {
    let done = control(mock, "modify", change).await;
    assert!(done.get("error").is_none(), "{done}");
}

/// A PATCH replaces the category list and bumps the changeKey; a stale If-Match is 412 and a
/// read-only property 400, and neither changes anything.
#[tokio::test]
async fn patch_honours_if_match_and_replaces_categories() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let id = mock.seed(1, "inbox", "a@example.test", true).remove(0);
    let before = mock.message(&id).unwrap();
    let bare = before["changeKey"].as_str().unwrap().to_string();
    // If-Match takes the entity tag the message's @odata.etag gives: W/"<changeKey>".
    let key = before["@odata.etag"].as_str().unwrap().to_string();
    assert_eq!(key, format!("W/\"{bare}\""));
    let (status, _) = api.patch(&id, json!({"isRead": true}), Some(&bare)).await;
    assert_eq!(status, 412, "a bare changeKey is no entity tag");
    let (status, after) = api
        .patch(
            &id,
            json!({"categories": ["Red", "Work"], "flag": {"flagStatus": "flagged"}}),
            Some(&key),
        )
        .await;
    assert_eq!(status, 200, "{after}");
    assert_ne!(after["changeKey"], before["changeKey"]);
    let (status, _) = api.patch(&id, json!({"categories": ["Blue"]}), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        mock.message(&id).unwrap()["categories"],
        json!(["Blue"]),
        "replaced whole"
    );
    let (status, stale) = api.patch(&id, json!({"isRead": true}), Some(&key)).await;
    assert_eq!(status, 412, "{stale}");
    assert_eq!(stale["error"]["code"], "ErrorIrresolvableConflict");
    let whole = mock.message(&id).unwrap();
    let (status, _) = api.patch(&id, whole, None).await;
    assert_eq!(status, 400, "a whole message read back is refused");
    assert_eq!(mock.message(&id).unwrap()["isRead"], false);
}

/// A move gives a new id unless immutable ids were asked for; the SDK's PascalCase
/// `DestinationId` works; permanentDelete removes the message.
#[tokio::test]
async fn moves_keep_immutable_ids_and_permanent_delete_removes() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let ids = mock.seed(3, "inbox", "a@example.test", false);
    let (status, moved) = api
        .post(
            &format!("/me/messages/{}/move", ids[0]),
            json!({"destinationId": "archive"}),
        )
        .await;
    assert_eq!(status, 201, "{moved}");
    assert_ne!(moved["id"], ids[0].as_str());
    let immutable = api
        .send(
            api.http
                .post(format!("{}/me/messages/{}/move", api.base, ids[1]))
                .header("Prefer", "IdType=\"ImmutableId\"")
                .json(&json!({"DestinationId": "deleteditems"})),
        )
        .await;
    assert_eq!(immutable.0, 201, "{}", immutable.1);
    assert_eq!(immutable.1["id"], ids[1].as_str());
    assert_eq!(mock.ids_in("deleteditems"), vec![ids[1].clone()]);
    let (status, _) = api
        .post(
            &format!("/me/messages/{}/permanentDelete", ids[2]),
            json!({}),
        )
        .await;
    assert_eq!(status, 204);
    assert!(mock.message(&ids[2]).is_none());
    let (status, _) = api.get(&format!("/me/messages/{}", ids[2])).await;
    assert_eq!(status, 404);
}

/// `$batch` runs up to 20 requests (absolute or relative urls) and answers each by id; 21
/// are refused whole, with nothing applied.
#[tokio::test]
async fn batch_answers_each_request_and_refuses_more_than_twenty() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let ids = mock.seed(21, "inbox", "a@example.test", true);
    let item = |n: usize, id: &str| {
        let url = match n % 2 {
            0 => format!("/me/messages/{id}"),
            _ => format!("{}/me/messages/{id}", api.base),
        };
        json!({"id": n.to_string(), "method": "PATCH", "url": url,
               "headers": {"content-type": "application/json"},
               "body": {"isRead": true}})
    };
    let all: Vec<Value> = ids.iter().enumerate().map(|(n, id)| item(n, id)).collect();
    let (status, refused) = api.post("/$batch", json!({"requests": all})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        ids.iter()
            .all(|id| mock.message(id).unwrap()["isRead"] == false)
    );

    let twenty = &all[..20];
    let (status, answer) = api.post("/$batch", json!({"requests": twenty})).await;
    assert_eq!(status, 200, "{answer}");
    let responses = answer["responses"].as_array().unwrap();
    assert_eq!(responses.len(), 20);
    assert!(responses.iter().all(|r| r["status"] == 200), "{answer}");
    assert!(
        ids[..20]
            .iter()
            .all(|id| mock.message(id).unwrap()["isRead"] == true)
    );
    let batches: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.inner.is_some())
        .collect();
    assert_eq!(
        batches.iter().map(|b| b.inner).collect::<Vec<_>>(),
        vec![Some(21), Some(20)]
    );

    let (status, made) = api
        .post(
            "/me/outlook/masterCategories",
            json!({"displayName": "Work", "color": "preset2"}),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let (status, _) = api
        .post(
            "/me/outlook/masterCategories",
            json!({"displayName": "work"}),
        )
        .await;
    assert_eq!(status, 409);
    let (_, listed) = api.get("/me/outlook/masterCategories").await;
    assert_eq!(listed["value"].as_array().unwrap().len(), 1);
}

async fn control(mock: &GraphMock, what: &str, body: Value) -> Value {
    mailbroker_testkit::oauth::control(&mock.url, what, body).await
}

async fn form(mock: &GraphMock, endpoint: &str, fields: &[(&str, &str)]) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/common/oauth2/v2.0/{endpoint}", mock.url))
        .form(fields)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

/// The device code flow as RFC 8628 and Microsoft's platform answer it: pending, then
/// slow_down for polling too fast, tokens once the person approved; an expired code; a
/// refresh that rotates; a revocation that kills tokens and refresh alike.
#[tokio::test]
async fn device_code_flow_refresh_and_revocation() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let scope = [
        ("client_id", "app"),
        ("scope", "Mail.ReadWrite offline_access User.Read"),
    ];
    let (status, code) = form(&mock, "devicecode", &scope).await;
    assert_eq!(status, 200, "{code}");
    assert_eq!(code["interval"], 1);
    let device = code["device_code"].as_str().unwrap().to_string();
    let poll = [
        ("grant_type", mailbroker_mock_graph::DEVICE_GRANT),
        ("client_id", "app"),
        ("device_code", device.as_str()),
    ];
    let (status, pending) = form(&mock, "token", &poll).await;
    assert_eq!(
        (status, pending["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    let (_, fast) = form(&mock, "token", &poll).await;
    assert_eq!(fast["error"], "slow_down", "{fast}");

    control(&mock, "identity", json!({"interval": 0})).await;
    let (_, code) = form(&mock, "devicecode", &scope).await;
    let device = code["device_code"].as_str().unwrap().to_string();
    let poll = [
        ("grant_type", mailbroker_mock_graph::DEVICE_GRANT),
        ("client_id", "app"),
        ("device_code", device.as_str()),
    ];
    let (_, pending) = form(&mock, "token", &poll).await;
    assert_eq!(pending["error"], "authorization_pending");
    control(
        &mock,
        "device/approve",
        json!({"user_code": code["user_code"]}),
    )
    .await;
    let (status, tokens) = form(&mock, "token", &poll).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    let me = |token: String| {
        let url = format!("{}/v1.0/me", mock.url);
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(me(access.clone()).await, 200);
    assert_eq!(me("made-up".into()).await, 401);
    let (_, reused) = form(&mock, "token", &poll).await;
    assert_eq!(
        reused["error"], "invalid_grant",
        "a device code is redeemed once"
    );

    let grant = [
        ("grant_type", "refresh_token"),
        ("client_id", "app"),
        ("refresh_token", refresh.as_str()),
    ];
    let (status, fresh) = form(&mock, "token", &grant).await;
    assert_eq!(status, 200, "{fresh}");
    let (_, again) = form(&mock, "token", &grant).await;
    assert_eq!(again["error"], "invalid_grant", "refresh tokens rotate");
    assert!(
        again["error_description"]
            .as_str()
            .unwrap()
            .starts_with("AADSTS")
    );

    control(&mock, "identity", json!({"device_ttl_secs": 0})).await;
    let (_, code) = form(&mock, "devicecode", &scope).await;
    let device = code["device_code"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let poll = [
        ("grant_type", mailbroker_mock_graph::DEVICE_GRANT),
        ("client_id", "app"),
        ("device_code", device.as_str()),
    ];
    let (_, expired) = form(&mock, "token", &poll).await;
    assert_eq!(expired["error"], "expired_token");

    control(&mock, "revoke-all", json!({})).await;
    let live = fresh["access_token"].as_str().unwrap().to_string();
    assert_eq!(me(live).await, 401);
    let next = fresh["refresh_token"].as_str().unwrap();
    let grant = [
        ("grant_type", "refresh_token"),
        ("client_id", "app"),
        ("refresh_token", next),
    ];
    let (_, revoked) = form(&mock, "token", &grant).await;
    assert_eq!(revoked["error"], "invalid_grant");
}

/// A rate limit answers a share of the requests inside a `$batch` with 429 and Retry-After,
/// unapplied; a dropped answer comes after the write was applied.
#[tokio::test]
async fn faults_limit_inner_requests_and_drop_answers_after_writing() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let ids = mock.seed(20, "inbox", "a@example.test", true);
    control(&mock, "faults", json!({"rate_limit": 0.25})).await;
    let requests: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            json!({"id": n.to_string(), "method": "PATCH", "url": format!("/me/messages/{id}"),
                             "body": {"isRead": true}})
        })
        .collect();
    let (status, answer) = api.post("/$batch", json!({"requests": requests})).await;
    assert_eq!(status, 200);
    let limited: Vec<&Value> = answer["responses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == 429)
        .collect();
    assert_eq!(limited.len(), 5, "{answer}");
    assert!(limited.iter().all(|r| r["headers"]["Retry-After"] == "1"));
    let read = ids
        .iter()
        .filter(|id| mock.message(id).unwrap()["isRead"] == true)
        .count();
    assert_eq!(read, 15, "limited requests are not applied");

    control(
        &mock,
        "faults",
        json!({"rate_limit": 0.0, "drop_after_write": 1}),
    )
    .await;
    let lost = api
        .http
        .patch(format!("{}/me/messages/{}", api.base, ids[0]))
        .bearer_auth(&api.token)
        .json(&json!({"flag": {"flagStatus": "flagged"}}))
        .send()
        .await;
    let answered = match lost {
        Ok(resp) => resp.bytes().await.is_ok(),
        Err(_) => false,
    };
    assert!(!answered, "the answer was dropped");
    assert_eq!(
        mock.message(&ids[0]).unwrap()["flag"]["flagStatus"],
        "flagged"
    );
}

/// Each endpoint wants its documented permission: the category list needs
/// MailboxSettings.Read (to list) or MailboxSettings.ReadWrite (to add), which
/// Mail.ReadWrite does not give; a message's categories need Mail.ReadWrite alone. Inside a
/// `$batch` each request is checked on its own.
#[tokio::test]
async fn every_endpoint_wants_its_documented_scope() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let id = mock.seed(1, "inbox", "a@example.test", true).remove(0);
    let api = Api {
        token: mock.token_for("Mail.ReadWrite offline_access User.Read"),
        ..Api::new(&mock)
    };
    let (status, refused) = api.get("/me/outlook/masterCategories").await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "ErrorAccessDenied");
    let (status, _) = api
        .post("/me/outlook/masterCategories", json!({"displayName": "X"}))
        .await;
    assert_eq!(status, 403);
    let (status, _) = api.patch(&id, json!({"categories": ["X"]}), None).await;
    assert_eq!(
        status, 200,
        "a message's categories need Mail.ReadWrite alone"
    );
    let (status, batch) = api
        .post(
            "/$batch",
            json!({"requests": [
                {"id": "1", "method": "GET", "url": "/me/outlook/masterCategories"},
                {"id": "2", "method": "GET", "url": format!("/me/messages/{id}")},
            ]}),
        )
        .await;
    assert_eq!(status, 200);
    let statuses: Vec<u64> = batch["responses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [403, 200]);
    let reader = Api {
        token: mock.token_for("Mail.Read MailboxSettings.Read"),
        ..Api::new(&mock)
    };
    assert_eq!(reader.get("/me/outlook/masterCategories").await.0, 200);
    assert_eq!(
        reader.patch(&id, json!({"isRead": true}), None).await.0,
        403
    );
    assert_eq!(reader.get("/me").await.0, 403, "/me needs User.Read");
}

/// A throttled `$batch` envelope is answered 429 with Retry-After, and none of its requests
/// ran.
#[tokio::test]
async fn a_batch_envelope_can_be_throttled_whole() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let id = mock.seed(1, "inbox", "a@example.test", true).remove(0);
    mailbroker_testkit::oauth::control(&mock.url, "faults", json!({"rate_limit": 1.0})).await;
    let resp = api
        .http
        .post(format!("{}/$batch", api.base))
        .bearer_auth(&api.token)
        .json(&json!({"requests": [
            {"id": "1", "method": "PATCH", "url": format!("/me/messages/{id}"),
             "body": {"isRead": true}, "headers": {"Content-Type": "application/json"}},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().get("retry-after").is_some());
    assert_eq!(mock.message(&id).unwrap()["isRead"], false, "nothing ran");
}

/// A message's MIME source, as `$value` gives it; Mail.ReadBasic does not reach it.
#[tokio::test]
async fn a_message_source_is_its_value() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let api = Api::new(&mock);
    let id = mock.seed(1, "inbox", "a@example.test", true).remove(0);
    let resp = api
        .http
        .get(format!("{}/me/messages/{id}/$value", api.base))
        .bearer_auth(&api.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let source = resp.text().await.unwrap();
    assert!(source.contains("From: a@example.test\r\n"), "{source}");
    assert!(source.contains("\r\n\r\nBody of "), "{source}");
    let basic = Api {
        token: mock.token_for("Mail.ReadBasic"),
        ..Api::new(&mock)
    };
    let (status, _) = basic.get(&format!("/me/messages/{id}/$value")).await;
    assert_eq!(status, 403);
}

/// The wire contract, shown once with requests that are wrong on purpose: Graph v1.0 refuses
/// a `$select` naming a beta-only property (`unsubscribeEnabled`) with its own 400 and text,
/// and a PATCH body or `$expand` naming what the published types lack, alone or inside a
/// `$batch`; the mock records each, and a mock that saw one fails its test when dropped
/// (which is how every adapter test in the suite is held to the schema).
#[tokio::test]
async fn what_v1_does_not_document_is_refused_and_fails_the_test() {
    let mock = GraphMock::start("me@mock.example").await.unwrap();
    let id = mock.seed(1, "inbox", "a@example.test", true).remove(0);
    let api = Api::new(&mock);
    let (status, body) = api
        .get("/me/mailFolders/inbox/messages/delta?$select=id,isRead,unsubscribeEnabled,unsubscribeData")
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "RequestBroker--ParseUri");
    assert_eq!(
        body["error"]["message"],
        "Could not find a property named 'unsubscribeEnabled' on type 'microsoft.graph.message'."
    );
    // What v1.0 has passes, its nested expansion included.
    let expand = "singleValueExtendedProperties($filter=id eq 'String {00020386-0000-0000-C000-000000000046} Name List-Id')";
    let (status, body) = api
        .get(&format!(
            "/me/messages/{id}?$select=isRead,conversationId&$expand={expand}"
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.get(&format!("/me/messages/{id}?$expand=flag")).await;
    assert_eq!(status, 400, "a complex property is not expandable: {body}");

    let (status, body) = api
        .patch(
            &id,
            json!({"isRead": true, "unsubscribeEnabled": false}),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "RequestBodyRead");
    assert!(
        body["error"]["message"].as_str().unwrap().starts_with(
            "The property 'unsubscribeEnabled' does not exist on type 'microsoft.graph.message'"
        ),
        "{body}"
    );
    let (status, body) = api
        .patch(&id, json!({"flag": {"flagStatus": "urgent"}}), None)
        .await;
    assert_eq!(status, 400, "an enum value v1.0 lacks: {body}");
    let (status, body) = api
        .post(
            "/$batch",
            json!({"requests": [{"id": "1", "method": "PATCH", "url": format!("/me/messages/{id}"),
                "headers": {"Content-Type": "application/json"}, "body": {"importanceX": "high"}}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["responses"][0]["status"], 400, "{body}");
    assert_eq!(
        mock.message(&id).unwrap()["isRead"],
        false,
        "nothing refused was applied"
    );

    let seen = mock.wire().seen();
    assert_eq!(seen.len(), 5, "{seen:#?}");
    assert!(seen[0].contains("unsubscribeEnabled"), "{seen:#?}");
    assert!(seen[4].contains("importanceX"), "{seen:#?}");
    // Dropped, the mock fails the test that sent these, naming them.
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(mock)));
    let message = failed.expect_err("dropping a mock that saw undocumented requests fails");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("unsubscribeEnabled"), "{message}");
    assert!(message.contains("importanceX"), "{message}");

    // A test that means to send such requests says so, and its mock drops quietly.
    let quiet = GraphMock::start("me@mock.example").await.unwrap();
    quiet.wire().expect_undocumented();
    let (status, _) = Api::new(&quiet)
        .get("/me/mailFolders/inbox/messages/delta?$select=unsubscribeData")
        .await;
    assert_eq!(status, 400);
    drop(quiet);
}
