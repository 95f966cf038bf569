//! `gmail-mock [EMAIL]`: serves the mock on a free loopback port and prints, as JSON, its URL
//! and the client file of the one OAuth client it knows (`client_file`).

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let email = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "me@mock.example".into());
    let mock = mailbroker_mock_gmail::GmailMock::start(&email).await?;
    println!(
        "{}",
        serde_json::json!({
            "url": mock.url,
            "email": email,
            "client_file": mailbroker_mock_gmail::client_file(&mock.url),
        })
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
