//! A stand-in for `osascript` driving Mail.app, for tests on machines without macOS. It reads
//! the script from stdin as `osascript` does, recognises which of mailbroker's scripts it is
//! (its first line) and reads its `params` record with the AppleScript tokenizer, then does to
//! a Mail.app kept as JSON in `$FAKE_MAIL_STATE` what Mail would, and answers what the script
//! would print: JSON on stdout, or an AppleEvent error on stderr with exit status 1.
//!
//! The state: `{"running": bool, "next_id": n, "accounts": {NAME: {"mailboxes": {PATH:
//! [message…]}, "junk": PATH, "trash": PATH}}, "faults": {…}, "log": [{"kind", "params"}]}`,
//! a PATH being mailbroker's path of the mailbox (`Clients/Acme`, `Clients\/Acme` for one
//! whose own name holds the slash); scripts name mailboxes as lists of names, as Mail does,
//! a message being `{"id", "message_id", "subject", "sender", "date", "read", "flagged"}`.
//! Faults: `timeout` (Mail does not answer within the script's timeout: -1712), `hang_secs`
//! (osascript itself never returns in time), `misfile_to` (a move lands there instead, as
//! Mail has done with Gmail moves), `fail_message_ids` (those messages fail alone).

use std::io::Read;

use anyhow::{Context, Result, anyhow};
use mailbroker_core::path;
use mailbroker_testkit::applescript::{kind, params};
use serde_json::{Value, json};

fn main() {
    match run() {
        Ok(Answer::Printed(out)) => println!("{out}"),
        Ok(Answer::AppleEvent(message, number)) => {
            eprintln!("-:1:1: execution error: Mail got an error: {message} ({number})");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("fake-osascript: {e:#}");
            std::process::exit(2);
        }
    }
}

enum Answer {
    Printed(String),
    AppleEvent(String, i64),
}

fn run() -> Result<Answer> {
    let mut script = String::new();
    std::io::stdin().read_to_string(&mut script)?;
    let path = std::env::var("FAKE_MAIL_STATE").context("FAKE_MAIL_STATE")?;
    let mut state: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let kind = kind(&script)
        .context("not a mailbroker script")?
        .to_string();
    let p = params(&script)?;
    state["log"]
        .as_array_mut()
        .map(|log| log.push(json!({ "kind": kind, "params": p })))
        .unwrap_or_else(|| state["log"] = json!([{ "kind": kind, "params": p }]));
    let answer = answer(&mut state, &kind, &p);
    std::fs::write(&path, serde_json::to_string_pretty(&state)?)?;
    if let Some(secs) = state["faults"]["hang_secs"].as_u64() {
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
    answer
}

fn answer(state: &mut Value, kind: &str, p: &Value) -> Result<Answer> {
    if state["running"] == false {
        return Ok(Answer::AppleEvent("Connection is invalid.".into(), -609));
    }
    if state["faults"]["timeout"] == true {
        return Ok(Answer::AppleEvent("AppleEvent timed out.".into(), -1712));
    }
    let name = p["acctName"].as_str().unwrap_or_default().to_string();
    if state["accounts"].get(&name).is_none() {
        return Ok(Answer::AppleEvent(
            format!("Can’t get account \"{name}\"."),
            -1728,
        ));
    }
    let out = match kind {
        "mailboxes" => mailboxes(&state["accounts"][&name]),
        "messages" => {
            let source = path_param(p, "boxPath");
            let Some(list) = state["accounts"][&name]["mailboxes"][&source].as_array() else {
                return Ok(no_mailbox(&source));
            };
            let first = p["firstIndex"].as_u64().unwrap_or(1) as usize;
            let last = (p["lastIndex"].as_u64().unwrap_or(0) as usize).min(list.len());
            let page: Vec<Value> = list
                .get(first - 1..last)
                .unwrap_or_default()
                .iter()
                .map(listed)
                .collect();
            json!({ "total": list.len(), "messages": page })
        }
        "apply" | "delete" => {
            let boxes = ["boxPath", "movePath"];
            for b in boxes
                .iter()
                .map(|b| path_param(p, b))
                .filter(|b| !b.is_empty())
            {
                if state["accounts"][&name]["mailboxes"].get(&b).is_none() {
                    return Ok(no_mailbox(&b));
                }
            }
            let results: Vec<Value> = p["targets"]
                .as_array()
                .ok_or_else(|| anyhow!("no targets"))?
                .iter()
                .map(|t| change(state, &name, kind, p, t))
                .collect();
            json!({ "results": results })
        }
        other => return Err(anyhow!("a script this fake does not know: {other}")),
    };
    Ok(Answer::Printed(out.to_string()))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// The path of the mailbox a script names by the list of names in `params[key]`; empty for
/// the empty list.
fn path_param(p: &Value, key: &str) -> String {
    let mut path: Option<String> = None;
    for name in p[key].as_array().into_iter().flatten() {
        path = Some(path::child_path(
            path.as_deref(),
            name.as_str().unwrap_or_default(),
        ));
    }
    path.unwrap_or_default()
}

/// A path as Mail names it: the list of names along it (`null` for no mailbox).
fn names(path: &Value) -> Value {
    match path.as_str() {
        Some(p) => json!(path::split_path(p)),
        None => Value::Null,
    }
}

/// Whether `m` has Mail's id `id` (a number, which scripts pass as text).
fn has_id(m: &Value, id: &str) -> bool {
    id.parse::<i64>()
        .ok()
        .is_some_and(|n| m["id"].as_i64() == Some(n))
}

fn no_mailbox(path: &str) -> Answer {
    Answer::AppleEvent(format!("no mailbox {path}"), -1728)
}

fn listed(m: &Value) -> Value {
    json!({ "mail_id": m["id"].to_string(), "message_id": m["message_id"], "subject": m["subject"],
        "sender": m["sender"], "date": m["date"], "read": m["read"], "flagged": m["flagged"] })
}

fn mailboxes(account: &Value) -> Value {
    let list: Vec<Value> = account["mailboxes"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(path, messages)| {
            let messages = messages.as_array().cloned().unwrap_or_default();
            let newest = messages.iter().filter_map(|m| m["date"].as_i64()).max();
            json!({ "path": path::split_path(path), "count": messages.len(), "newest": newest })
        })
        .collect();
    json!({ "mailboxes": list, "junk": names(&account["junk"]), "trash": names(&account["trash"]) })
}

/// One target of an apply or delete script, as the script's loop treats it.
fn change(state: &mut Value, account: &str, kind: &str, p: &Value, t: &Value) -> Value {
    let (mail_id, message_id) = (str_of(t, "mailId"), str_of(t, "messageId"));
    let failed = |msg: &str, number: i64| json!({ "mail_id": mail_id, "message_id": message_id, "found": false, "error": msg, "number": number });
    let boxes = &mut state["accounts"][account]["mailboxes"];
    let source = path_param(p, "boxPath");
    let source = source.as_str();
    let Some(list) = boxes[source].as_array_mut() else {
        return failed("no mailbox", -1728);
    };
    let by_id = list.iter().position(|m| has_id(m, mail_id));
    let at = match by_id {
        Some(i) if !message_id.is_empty() && list[i]["message_id"] != message_id => {
            return failed("another message has this id now", 4001);
        }
        Some(i) => Some(i),
        None => {
            let sharing = |m: &&Value| !message_id.is_empty() && m["message_id"] == message_id;
            let n = list.iter().filter(sharing).count();
            if n > 1 {
                return failed(&format!("{n} messages there share its Message-ID"), 4002);
            }
            list.iter().position(|m| sharing(&m))
        }
    };
    let Some(at) = at else {
        return failed("not found", -1728);
    };
    let fail_ids = state["faults"]["fail_message_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if fail_ids.iter().any(|f| f == message_id) {
        return failed(
            "Mail got an error: the operation could not be completed",
            -10000,
        );
    }
    let next_id = state["next_id"].as_i64().unwrap_or(1000);
    let misfile = state["faults"]["misfile_to"].as_str().map(str::to_string);
    let trash = str_of(&state["accounts"][account], "trash").to_string();
    let boxes = &mut state["accounts"][account]["mailboxes"];
    let list = boxes[source].as_array_mut().expect("checked above");
    for (key, field) in [("wantRead", "read"), ("wantFlagged", "flagged")] {
        match str_of(p, key) {
            "true" => list[at][field] = json!(true),
            "false" => list[at][field] = json!(false),
            _ => {}
        }
    }
    let wanted = match kind {
        "delete" => trash,
        _ => path_param(p, "movePath"),
    };
    let mut here = source.to_string();
    if !wanted.is_empty() {
        let mut message = list.remove(at);
        message["id"] = json!(next_id);
        let landed = misfile.unwrap_or_else(|| wanted.clone());
        if let Some(list) = boxes[&landed].as_array_mut() {
            list.push(message.clone());
        }
        state["next_id"] = json!(next_id + 1);
        // The script looks for the message where it asked it to go, by Message-ID.
        let there = state["accounts"][account]["mailboxes"][&landed]
            .as_array()
            .map_or(0, |l| {
                l.iter().filter(|m| m["message_id"] == message_id).count()
            });
        if landed == wanted && there > 1 {
            let error = format!("{there} messages there share its Message-ID");
            return json!({ "mail_id": mail_id, "message_id": message_id, "found": false, "unknown": true, "error": error });
        }
        if landed != wanted {
            let error = format!("not in {wanted} after the move");
            return json!({ "mail_id": mail_id, "message_id": message_id, "found": false, "lost": true, "error": error });
        }
        here = wanted;
    }
    let message = state["accounts"][account]["mailboxes"][&here]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|m| m["message_id"] == message_id || has_id(m, mail_id))
        })
        .cloned()
        .unwrap_or(Value::Null);
    json!({ "mail_id": message["id"].to_string(), "message_id": message_id, "found": true,
        "read": message["read"], "flagged": message["flagged"], "mailbox": path::split_path(&here) })
}
