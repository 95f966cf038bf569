//! `bench mcp --messages N`: latency of MCP tool calls over Streamable HTTP on loopback,
//! against the real `mailbroker mcp --http` process and an index of N synced messages.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mailbroker_testkit::Dovecot;
use serde_json::{Value, json};

const CALLS: usize = 1000;
const TOKEN: &str = "bench-token-0123456789abcdef";

/// Kills the server process (by its pid) when the bench ends, however it ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

/// One JSON-RPC exchange; the answer may come as JSON or as one SSE event.
pub async fn rpc(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: Value,
) -> Result<(Option<String>, Value)> {
    let mut request = http
        .post(url)
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&body);
    if let Some(id) = session {
        request = request.header("Mcp-Session-Id", id);
    }
    let response = request.send().await?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let status = response.status();
    let text = response.text().await?;
    if !status.is_success() {
        bail!("HTTP {status}: {text}");
    }
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| !d.is_empty())
        .unwrap_or(text.trim());
    let value = if data.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(data).with_context(|| format!("answer: {text}"))?
    };
    Ok((session, value))
}

async fn time_calls(
    http: &reqwest::Client,
    url: &str,
    session: &str,
    tool: &str,
    args: Value,
    calls: usize,
) -> Result<(f64, f64)> {
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls {
        let body = json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let start = Instant::now();
        let (_, answer) = rpc(http, url, Some(session), body).await?;
        times.push(start.elapsed());
        if answer["result"]["structuredContent"]["success"] != true {
            bail!("{tool} failed: {answer}");
        }
    }
    times.sort();
    Ok((
        super::percentile(&times, 0.5),
        super::percentile(&times, 0.99),
    ))
}

/// An HTML newsletter as shops send them: a table layout, styles, links, an unsubscribe
/// footer.
fn newsletter() -> Vec<u8> {
    let items: String = (1..=8)
        .map(|i| {
            format!(
                "<tr><td style=\"padding:12px;font-family:Arial\"><a href=\"https://shop.example/p/{i}?utm_source=news&amp;utm_medium=email\">\
                 <img src=\"https://cdn.shop.example/{i}.jpg\" width=\"120\" alt=\"Product {i}\"></a></td>\
                 <td style=\"padding:12px\"><h3>Product {i}: winter jacket, model {i}</h3><p>Now {i}9.99 instead of {i}9.99 + 20.\
                 Free delivery over 50. <a href=\"https://shop.example/p/{i}\">See it</a></p></td></tr>"
            )
        })
        .collect();
    format!(
        "From: Shop <news@shop.example>\r\nTo: user@example.test\r\nSubject: Winter sale: up to 50% off\r\n\
         Date: Mon, 2 Nov 2026 09:00:00 +0000\r\nMessage-ID: <newsletter1@shop.example>\r\n\
         List-Id: Shop news <news.shop.example>\r\nList-Unsubscribe: <https://shop.example/unsub?u=1>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
         <html><head><style>body{{font-family:Arial}} .x{{color:#333}}</style></head><body>\
         <table width=\"600\"><tr><td><h1>Winter sale</h1><p>Up to 50% off everything this week.</p></td></tr>\
         {items}<tr><td><p style=\"font-size:10px\">You receive this because you subscribed. \
         <a href=\"https://shop.example/unsub?u=1\">Unsubscribe</a> · Shop Ltd, 1 High Street</p></td></tr>\
         </table></body></html>\r\n"
    )
    .into_bytes()
}

pub async fn bench_mcp(messages: usize) -> Result<()> {
    let bin = super::mailbroker_binary()?;
    let server = Dovecot::start()?;
    let corpus = (0..messages).map(super::bench_message);
    server.import_messages("bm", corpus.chain(std::iter::once(newsletter())))?;
    let home = tempfile::tempdir()?;
    super::add_and_sync(&bin, home.path(), "bm", server.imap_port)?;
    twenty_changes(&bin, home.path())?;
    println!("MCP over Streamable HTTP (loopback), {messages} messages indexed:");
    let read_only = Session::start(&bin, home.path()).await?;
    let list = tools_list(&read_only).await?;
    println!("read-only tool list (HTTP without --http-allow-writes): {list} tokens");
    drop(read_only);
    let args = ["mcp", "--http", "0", "--http-allow-writes"];
    let session = Session::start_with(&bin, home.path(), &args).await?;
    report_tokens(&session).await?;
    session.time(&["from:alice invoices"], CALLS).await
}

/// Twenty changes in the journal, one message each, made at the CLI.
fn twenty_changes(bin: &Path, home: &Path) -> Result<()> {
    let found = super::run_mailbroker(bin, home, &["search", "--limit", "20", "from:alice"])?;
    let ids: Vec<String> = found.json["messages"]
        .as_array()
        .context("no messages")?
        .iter()
        .map(|m| m["id"].to_string())
        .collect();
    for id in &ids {
        super::run_mailbroker(bin, home, &["update", id, "--flag", "--yes"])?;
    }
    Ok(())
}

/// Serves `home` over MCP and times `list_accounts` and a `search_messages` for each of
/// `queries` (a fifth as many calls each).
pub async fn serve_and_time(bin: &Path, home: &Path, queries: &[&str]) -> Result<()> {
    println!("MCP over Streamable HTTP (loopback), same index:");
    let session = Session::start(bin, home).await?;
    session.time(queries, CALLS / 5).await
}

/// A running `mailbroker mcp --http` (or `serve`) and one initialized session with it.
pub struct Session {
    server: Server,
    pub http: reqwest::Client,
    pub url: String,
    pub id: String,
}

impl Session {
    async fn start(bin: &Path, home: &Path) -> Result<Session> {
        Session::start_with(bin, home, &["mcp", "--http", "0"]).await
    }

    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.server.0.id()
    }

    /// Starts `mailbroker ARGS --http-token-file …` (an HTTP-serving command) and opens a
    /// session with it.
    pub async fn start_with(bin: &Path, home: &Path, args: &[&str]) -> Result<Session> {
        let token_file = home.join("token");
        std::fs::write(&token_file, TOKEN)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))?;
        let mut child = Command::new(bin)
            .arg("--home")
            .arg(home)
            .args(args)
            .arg("--http-token-file")
            .arg(&token_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        let mut stderr = BufReader::new(child.stderr.take().context("stderr")?);
        stderr.read_line(&mut line)?;
        // Drained to the bench's own stderr: a server blocked on a full pipe measures nothing.
        std::thread::spawn(move || {
            for l in stderr.lines().map_while(Result::ok) {
                eprintln!("  [server] {l}");
            }
        });
        let server = Server(child);
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .with_context(|| format!("no url in {line:?}"))?
            .to_string();
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}});
        let (id, _) = rpc(&http, &url, None, init).await?;
        let id = id.context("no session id")?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        rpc(&http, &url, Some(&id), initialized).await?;
        Ok(Session {
            server,
            http,
            url,
            id,
        })
    }

    /// How long after `since` (another client's APPEND) a search for `query` finds exactly
    /// one message, asking every 5 ms; an error after 30 s.
    pub async fn until_found(&self, query: &str, since: Instant) -> Result<Duration> {
        let call = json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {
            "name": "search_messages", "arguments": {"query": query}}});
        loop {
            let (_, answer) = rpc(&self.http, &self.url, Some(&self.id), call.clone()).await?;
            if answer["result"]["structuredContent"]["total"] == 1 {
                return Ok(since.elapsed());
            }
            if since.elapsed() > Duration::from_secs(30) {
                bail!("{query} not searchable within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn time(&self, queries: &[&str], calls: usize) -> Result<()> {
        let (http, url, id) = (&self.http, self.url.as_str(), self.id.as_str());
        let cheap = time_calls(http, url, id, "list_accounts", json!({}), CALLS).await?;
        println!(
            "  list_accounts ({CALLS} calls): p50 {:.2} ms, p99 {:.2} ms",
            cheap.0, cheap.1
        );
        for query in queries {
            let args = json!({"query": query, "limit": 20});
            let (p50, p99) = time_calls(http, url, id, "search_messages", args, calls).await?;
            println!(
                "  search_messages {query:<38} ({calls} calls): p50 {p50:.2} ms, p99 {p99:.2} ms"
            );
        }
        Ok(())
    }
}

/// The tokens of `tools/list` as `session` gets it.
async fn tools_list(session: &Session) -> Result<usize> {
    let bpe = mailbroker_testkit::tokens::encoder()?;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (_, listed) = rpc(&session.http, &session.url, Some(&session.id), list).await?;
    Ok(mailbroker_testkit::tokens::of(
        &bpe,
        &listed["result"]["tools"],
    ))
}

/// One tool call's result.
async fn call(session: &Session, tool: &str, arguments: Value) -> Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let (_, answer) = rpc(&session.http, &session.url, Some(&session.id), body).await?;
    if answer["result"]["structuredContent"]["success"] != true {
        bail!("{tool} failed: {answer}");
    }
    Ok(answer["result"].clone())
}

/// What an assistant's context pays: the full tool list a stdio client gets (each tool's
/// share, and the output schemas'), a 20-row search, one HTML newsletter read, and the
/// journal's 20 newest changes.
async fn report_tokens(session: &Session) -> Result<()> {
    let bpe = mailbroker_testkit::tokens::encoder()?;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (_, listed) = rpc(&session.http, &session.url, Some(&session.id), list).await?;
    let tools = listed["result"]["tools"].as_array().context("no tools")?;
    let schemas: usize = tools
        .iter()
        .map(|t| mailbroker_testkit::tokens::of(&bpe, &t["outputSchema"]))
        .sum();
    let total = mailbroker_testkit::tokens::of(&bpe, &listed["result"]["tools"]);
    println!(
        "full tool list (stdio, or HTTP with --http-allow-writes), {} tools: {total} tokens; output schemas {schemas} ({:.0}%)",
        tools.len(),
        100.0 * schemas as f64 / total as f64
    );
    for tool in tools {
        println!(
            "  {}: {} tokens",
            tool["name"].as_str().unwrap_or("?"),
            mailbroker_testkit::tokens::of(&bpe, tool)
        );
    }
    let result = call(
        session,
        "search_messages",
        json!({"query": "invoices", "limit": 20}),
    )
    .await?;
    let rows = result["structuredContent"]["messages"]
        .as_array()
        .map_or(0, Vec::len);
    if rows != 20 {
        bail!("the search found {rows} rows, not 20");
    }
    println!(
        "search_messages, 20 rows: {} tokens (structured content {}, text content {})",
        mailbroker_testkit::tokens::of(&bpe, &result),
        mailbroker_testkit::tokens::of(&bpe, &result["structuredContent"]),
        mailbroker_testkit::tokens::of(&bpe, &result["content"])
    );
    let found = call(
        session,
        "search_messages",
        json!({"query": "subject:\"Winter sale: up to 50%\""}),
    )
    .await?;
    if found["structuredContent"]["total"] != 1 {
        bail!("the newsletter is not the one message found: {found}");
    }
    let id = found["structuredContent"]["messages"][0]["id"].clone();
    let read = call(session, "get_messages", json!({"ids": [id]})).await?;
    let message = &read["structuredContent"]["messages"][0];
    println!(
        "get_messages of one HTML newsletter: {} tokens (body {} characters, {} tokens)",
        mailbroker_testkit::tokens::of(&bpe, &read),
        message["body_chars"],
        mailbroker_testkit::tokens::of(&bpe, &message["body"])
    );
    let changes = call(session, "list_changes", json!({})).await?;
    let listed = changes["structuredContent"]["changes"]
        .as_array()
        .map_or(0, Vec::len);
    if listed != 20 {
        bail!("list_changes listed {listed} changes, not 20");
    }
    println!(
        "list_changes, 20 changes: {} tokens",
        mailbroker_testkit::tokens::of(&bpe, &changes)
    );
    Ok(())
}
