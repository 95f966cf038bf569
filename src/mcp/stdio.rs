//! `mailbroker mcp` over stdin/stdout.
//!
//! rmcp's own stdio transport ignores a line that is not JSON at all, on purpose (its
//! maintainers fear an error storm with a peer that echoes replies as more garbage). A
//! client that sent one then waits for an answer that never comes. Here each such line gets
//! the JSON-RPC parse error (-32700, `id: null`) instead; the reply is valid JSON, so an
//! echo of it is a message, not more garbage, and no storm can start from our side. Every
//! other line goes to rmcp unchanged.
//!
//! Architecture Invariant: nothing but protocol frames goes to stdout; one task writes it,
//! a whole line at a time.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use mailbroker_core::{Error, Result};
use rmcp::ServiceExt;

use super::{McpOptions, McpServer};
use crate::home::Home;
use crate::store::Store;

/// The answer to a line that is not JSON.
const PARSE_ERROR: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: the line is not JSON\"}}\n";

/// Serves MCP on stdin/stdout until the client closes.
pub async fn serve_stdio(home: Home, store: Store, options: McpOptions) -> Result<()> {
    relay(
        McpServer::new(home, store, options),
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await
}

/// Serves `server` on `input`/`output`, answering lines that are not JSON itself.
pub async fn relay(
    server: McpServer,
    input: impl AsyncRead + Unpin + Send + 'static,
    mut output: impl AsyncWrite + Unpin + Send,
) -> Result<()> {
    let (mut to_server, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, from_server) = tokio::io::duplex(1 << 20);
    // The session runs on its own: starting it waits for the client's initialize, which
    // only the relay below passes on.
    let session = tokio::spawn(async move {
        let running = server
            .serve((server_in, server_out))
            .await
            .map_err(|e| Error::internal(format!("MCP session failed to start: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::internal(format!("MCP session ended abnormally: {e}")))?;
        Ok::<(), Error>(())
    });
    let (garbage, mut answers) = tokio::sync::mpsc::unbounded_channel::<()>();
    let reading = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            if serde_json::from_slice::<serde_json::Value>(text).is_err() {
                let _ = garbage.send(());
                continue;
            }
            if to_server.write_all(&line).await.is_err() {
                break;
            }
        }
        // Dropping `to_server` ends the session.
    });
    let mut replies = BufReader::new(from_server);
    // Not cleared until a whole line is written: `read_until` keeps what it read when the
    // other branch wins, and goes on from there.
    let mut line = Vec::new();
    let mut garbage_open = true;
    loop {
        tokio::select! {
            read = replies.read_until(b'\n', &mut line) => {
                let done = read.map_or(true, |n| n == 0);
                if !line.is_empty() {
                    write_line(&mut output, &line).await?;
                    line.clear();
                }
                if done {
                    break;
                }
            }
            answer = answers.recv(), if garbage_open => match answer {
                Some(()) => write_line(&mut output, PARSE_ERROR).await?,
                None => garbage_open = false,
            },
        }
    }
    reading.abort();
    session
        .await
        .map_err(|e| Error::internal(format!("MCP session: {e}")))?
}

async fn write_line(output: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> Result<()> {
    let written = async {
        output.write_all(line).await?;
        output.flush().await
    };
    written
        .await
        .map_err(|e| Error::internal(format!("MCP stdout: {e}")))
}
