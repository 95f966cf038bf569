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
//! A draft script saves its draft in the drafts mailbox with `to`, `cc`, `content` and
//! `in_reply_to` (the original's Message-ID: Mail's `reply` threads it) beside those.
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
        "sources" => {
            let source = path_param(p, "boxPath");
            let Some(list) = state["accounts"][&name]["mailboxes"][&source].as_array() else {
                return Ok(no_mailbox(&source));
            };
            let results: Vec<Value> = (p["targets"].as_array().into_iter().flatten())
                .filter_map(|t| {
                    let at = find(list, str_of(t, "mailId"), str_of(t, "messageId")).ok()?;
                    let m = &list[at];
                    Some(json!({ "mail_id": m["id"].to_string(), "source": source_of(m) }))
                })
                .collect();
            json!({ "results": results })
        }
        "draft" => return Ok(draft(state, &name, p)),
        "remove_draft" => return Ok(remove_draft(state, &name, p)),
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

/// Where the script's `findMessage` finds a message in `list`: by Mail's id (not one whose
/// Message-ID is another: 4001), else by Message-ID (several sharing it are none: 4002).
fn find(list: &[Value], mail_id: &str, message_id: &str) -> Result<usize, (String, i64)> {
    match list.iter().position(|m| has_id(m, mail_id)) {
        Some(i) if !message_id.is_empty() && list[i]["message_id"] != message_id => {
            Err(("another message has this id now".into(), 4001))
        }
        Some(i) => Ok(i),
        None => {
            let sharing = |m: &&Value| !message_id.is_empty() && m["message_id"] == message_id;
            let n = list.iter().filter(sharing).count();
            if n > 1 {
                return Err((format!("{n} messages there share its Message-ID"), 4002));
            }
            (list.iter().position(|m| sharing(&m))).ok_or(("not found".into(), -1728))
        }
    }
}

/// A message's source: its own `source`, else one made of its fields.
fn source_of(m: &Value) -> String {
    if let Some(source) = m["source"].as_str() {
        return source.to_string();
    }
    format!(
        "From: {}\r\nSubject: {}\r\nMessage-ID: <{}>\r\n\r\n{}\r\n",
        str_of(m, "sender"),
        str_of(m, "subject"),
        str_of(m, "message_id"),
        str_of(m, "content")
    )
}

/// A draft script: the original found (a reply) and the draft put in the drafts mailbox as
/// Mail saves it, with a Message-ID of Mail's making; `reply` threads it (`in_reply_to`).
fn draft(state: &mut Value, account: &str, p: &Value) -> Answer {
    let drafts = path_param(p, "draftsPath");
    if state["accounts"][account]["mailboxes"]
        .get(&drafts)
        .is_none()
    {
        return no_mailbox(&drafts);
    }
    let mut in_reply_to = Value::Null;
    let source = path_param(p, "boxPath");
    if !source.is_empty() {
        let Some(list) = state["accounts"][account]["mailboxes"][&source].as_array() else {
            return no_mailbox(&source);
        };
        let t = &p["original"][0];
        match find(list, str_of(t, "mailId"), str_of(t, "messageId")) {
            Ok(at) => in_reply_to = list[at]["message_id"].clone(),
            Err((msg, number)) => return Answer::AppleEvent(msg, number),
        }
    }
    let id = state["next_id"].as_i64().unwrap_or(1000);
    state["next_id"] = json!(id + 1);
    let addresses = |key: &str| -> Vec<Value> {
        (p[key].as_array().into_iter().flatten())
            .map(|r| r["addr"].clone())
            .collect()
    };
    let saved = json!({
        "id": id, "message_id": format!("{id}.draft@fake-mail.local"),
        "subject": p["subjectText"], "sender": p["senderText"], "date": 1_800_000_000 + id,
        "read": true, "flagged": false, "to": addresses("toList"), "cc": addresses("ccList"),
        "content": p["bodyText"], "in_reply_to": in_reply_to, "reply_all": p["replyAll"] == "true",
    });
    if let Some(list) = state["accounts"][account]["mailboxes"][&drafts].as_array_mut() {
        list.push(saved.clone());
    }
    let answer = json!({ "saved": 1, "mail_id": id.to_string(), "message_id": saved["message_id"],
        "mailbox": path::split_path(&drafts), "read": true, "flagged": false });
    Answer::Printed(answer.to_string())
}

/// A remove_draft script: the draft deleted (to the trash) if it is there as saved.
fn remove_draft(state: &mut Value, account: &str, p: &Value) -> Answer {
    let source = path_param(p, "boxPath");
    let t = &p["targets"][0];
    let (mail_id, message_id) = (str_of(t, "mailId"), str_of(t, "messageId"));
    let trash = str_of(&state["accounts"][account], "trash").to_string();
    let Some(list) = state["accounts"][account]["mailboxes"][&source].as_array_mut() else {
        return no_mailbox(&source);
    };
    let at = match find(list, mail_id, message_id) {
        Ok(at) => at,
        Err((msg, number)) => {
            let failed = json!({ "mail_id": mail_id, "message_id": message_id, "found": false,
                "error": msg, "number": number });
            return Answer::Printed(failed.to_string());
        }
    };
    let gone = list.remove(at);
    if let Some(bin) = state["accounts"][account]["mailboxes"][&trash].as_array_mut() {
        bin.push(gone);
    }
    Answer::Printed(json!({ "found": true, "gone": true }).to_string())
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
    let at = match find(list, mail_id, message_id) {
        Ok(at) => at,
        Err((msg, number)) => return failed(&msg, number),
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
