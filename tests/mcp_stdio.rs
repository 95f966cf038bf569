//! The real binary's stdio transport, line by line as a client writes it: a line that is not
//! JSON gets the JSON-RPC parse error, and arguments of the wrong type are a tool error with
//! `error_type: validation_error` and a next step.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

struct Server {
    child: Child,
    input: ChildStdin,
    /// stdout's lines, read on a thread so that a reply that never comes fails the test.
    replies: std::sync::mpsc::Receiver<String>,
}

impl Server {
    fn start(home: &std::path::Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mailbroker"))
            .arg("--home")
            .arg(home)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mailbroker mcp");
        let input = child.stdin.take().unwrap();
        let output: BufReader<ChildStdout> = BufReader::new(child.stdout.take().unwrap());
        let (lines, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in output.lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            input,
            replies,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.input, "{line}").unwrap();
        self.input.flush().unwrap();
    }

    fn reply(&mut self) -> Value {
        let line = self
            .replies
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("no reply within 10 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn garbage_lines_and_wrong_argument_types_get_answers() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    server.send("this is not json");
    let parse = server.reply();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert!(parse["id"].is_null(), "{parse}");

    server.send(
        &json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": { "name": "raw", "version": "1" }
            }
        })
        .to_string(),
    );
    let init = server.reply();
    assert_eq!(init["id"], 1, "{init}");
    server.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string());
    // Still answering after garbage in the middle of a session.
    server.send("{ broken");
    assert_eq!(server.reply()["error"]["code"], -32700);

    server.send(
        &json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "update_message", "arguments": { "ids": "three", "read": true } }
        })
        .to_string(),
    );
    let call = server.reply();
    assert_eq!(call["id"], 2, "{call}");
    let result = &call["result"];
    assert_eq!(result["isError"], true, "{call}");
    let body = &result["structuredContent"];
    assert_eq!(body["error_type"], "validation_error", "{call}");
    assert!(
        body["next_step"].as_str().is_some_and(|s| !s.is_empty()),
        "{call}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("update_message"),
        "{call}"
    );
}
