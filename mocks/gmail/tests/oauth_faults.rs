//! The mock's OAuth (the client and its secret, PKCE, refresh, revoke) and its faults, from a
//! plain HTTP client.

use base64::Engine;
use mailbroker_mock_gmail::{GmailMock, SCOPE_MODIFY, TEST_CLIENT};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn code_for(mock: &GmailMock, http: &reqwest::Client, challenge: &str) -> String {
    let auth = http
        .get(format!("{}/o/oauth2/v2/auth", mock.url))
        .query(&[
            ("client_id", "test"),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("response_type", "code"),
            ("scope", SCOPE_MODIFY),
            ("state", "xyz"),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(auth.status(), 302);
    let location = auth.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("http://127.0.0.1:9/cb?code="),
        "{location}"
    );
    assert!(location.ends_with("&state=xyz"), "{location}");
    location
        .split("code=")
        .nth(1)
        .and_then(|r| r.split('&').next())
        .unwrap()
        .to_string()
}

/// A token request from the test client, its id and secret in the body.
async fn token(mock: &GmailMock, http: &reqwest::Client, form: &[(&str, &str)]) -> (u16, Value) {
    let mut form = form.to_vec();
    form.extend([
        ("client_id", TEST_CLIENT.0),
        ("client_secret", TEST_CLIENT.1),
    ]);
    answer(http.post(format!("{}/token", mock.url)).form(&form)).await
}

/// The refresh grant for `refresh`, from the test client.
async fn refresh_grant(mock: &GmailMock, http: &reqwest::Client, refresh: &str) -> (u16, Value) {
    let grant = [("grant_type", "refresh_token"), ("refresh_token", refresh)];
    token(mock, http, &grant).await
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn profile(mock: &GmailMock, http: &reqwest::Client, access: &str) -> reqwest::Response {
    http.get(format!("{}/gmail/v1/users/me/profile", mock.url))
        .bearer_auth(access)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn pkce_is_verified_tokens_refresh_and_revocation_sticks() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let http = client();
    let verifier = "a-long-random-verifier-0123456789-abcdefghijklmnop";
    let challenge =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier));

    let code = code_for(&mock, &http, &challenge).await;
    let wrong = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", "not-the-verifier"),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
    ];
    let (status, body) = token(&mock, &http, &wrong).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // A code is single use, so a fresh one for the right verifier.
    let code = code_for(&mock, &http, &challenge).await;
    let right = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("code_verifier", verifier),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
    ];
    let (status, tokens) = token(&mock, &http, &right).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["scope"], SCOPE_MODIFY);
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(profile(&mock, &http, &access).await.status(), 200);
    let (status, _) = token(&mock, &http, &right).await;
    assert_eq!(status, 400, "a used code must not work twice");

    // Expired: 401 until refreshed.
    let expire = http
        .post(format!("{}/_mock/faults", mock.url))
        .json(&json!({ "expire_tokens": true }));
    expire.send().await.unwrap();
    assert_eq!(profile(&mock, &http, &access).await.status(), 401);
    let (status, fresh) = refresh_grant(&mock, &http, &refresh).await;
    assert_eq!(status, 200, "{fresh}");
    let access = fresh["access_token"].as_str().unwrap().to_string();
    assert_eq!(profile(&mock, &http, &access).await.status(), 200);

    // Revoked: the refresh token is dead (invalid_grant).
    http.post(format!("{}/revoke", mock.url))
        .form(&[("token", refresh.as_str())])
        .send()
        .await
        .unwrap();
    let (status, body) = refresh_grant(&mock, &http, &refresh).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn faults_rate_limit_fail_and_drop_answers() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let http = client();
    let seeded: Value = http
        .post(format!("{}/_mock/seed", mock.url))
        .json(&json!({ "count": 3, "labels": ["INBOX"] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = seeded["ids"][0].as_str().unwrap().to_string();
    let access = mock.token(&[SCOPE_MODIFY]);
    let faults = json!({ "rate_limit": 0.5, "retry_after_secs": 2, "errors": 1 });
    http.post(format!("{}/_mock/faults", mock.url))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert_eq!(profile(&mock, &http, &access).await.status(), 500);
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(profile(&mock, &http, &access).await.status().as_u16());
        }
        v
    };
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        2,
        "{statuses:?}"
    );
    let limited = loop {
        let r = profile(&mock, &http, &access).await;
        if r.status() == 429 {
            break r;
        }
    };
    assert_eq!(limited.headers()["retry-after"], "2");

    // A write whose answer is lost was still applied.
    let calm = json!({ "drop_after_write": 1 });
    http.post(format!("{}/_mock/faults", mock.url))
        .json(&calm)
        .send()
        .await
        .unwrap();
    let lost = http
        .post(format!(
            "{}/gmail/v1/users/me/messages/batchModify",
            mock.url
        ))
        .bearer_auth(&access)
        .json(&json!({ "ids": [id], "addLabelIds": ["STARRED"] }))
        .send()
        .await;
    let lost_body = match lost {
        Ok(r) => r.bytes().await.is_err(),
        Err(_) => true,
    };
    assert!(lost_body, "the answer should have been lost");
    assert!(mock.label_names(&id).contains(&"STARRED".to_string()));
}

/// Google's token endpoint wants a Desktop app client's secret, in the body or as HTTP Basic
/// credentials; without it `invalid_request` "client_secret is missing.", a wrong one or an
/// unknown client `invalid_client`. And it can end every sign-in, as Testing does after 7
/// days.
#[tokio::test]
async fn the_token_endpoint_checks_the_client_and_can_expire_every_grant() {
    let mock = GmailMock::start("me@mock.example").await.unwrap();
    let http = client();
    let (_, refresh) = mock.grant(&[SCOPE_MODIFY]);
    let url = format!("{}/token", mock.url);
    let grant = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut form: Vec<(&str, &str)> = grant.to_vec();
        form.extend_from_slice(extra);
        http.post(&url).form(&form)
    };
    let (status, body) = answer(with(&[("client_id", TEST_CLIENT.0)])).await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("invalid_request")),
        "{body}"
    );
    assert_eq!(body["error_description"], "client_secret is missing.");
    let wrong = [
        ("client_id", TEST_CLIENT.0),
        ("client_secret", "GOCSPX-wrong"),
    ];
    let (status, body) = answer(with(&wrong)).await;
    assert_eq!(
        (status, &body["error"]),
        (401, &json!("invalid_client")),
        "{body}"
    );
    let unknown = [
        ("client_id", "someone-else"),
        ("client_secret", TEST_CLIENT.1),
    ];
    let (status, body) = answer(with(&unknown)).await;
    assert_eq!(
        (status, &body["error"]),
        (401, &json!("invalid_client")),
        "{body}"
    );
    let basic = with(&[]).basic_auth(TEST_CLIENT.0, Some(TEST_CLIENT.1));
    let (status, body) = answer(basic).await;
    assert_eq!(status, 200, "{body}");
    let refresh = body["refresh_token"]
        .as_str()
        .map_or(refresh.clone(), str::to_string);

    http.post(format!("{}/_mock/faults", mock.url))
        .json(&json!({ "expire_refresh_tokens": true }))
        .send()
        .await
        .unwrap();
    let (status, body) = refresh_grant(&mock, &http, &refresh).await;
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("invalid_grant")),
        "{body}"
    );
    assert_eq!(
        body["error_description"],
        "Token has been expired or revoked."
    );
}
