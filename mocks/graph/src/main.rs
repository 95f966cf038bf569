//! `graph-mock [EMAIL]`: serves the mock on a free loopback port and prints its URL as JSON.

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let email = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "me@mock.example".into());
    let mock = mailbroker_mock_graph::GraphMock::start(&email).await?;
    println!("{}", serde_json::json!({ "url": mock.url, "email": email }));
    tokio::signal::ctrl_c().await?;
    Ok(())
}
