//! The AppleScript this adapter runs, made by pure functions.
//!
//! Every script has the same shape: a first line naming what it does (`-- mailbroker apply`),
//! one `set params to {…}` record holding every value that came from outside (account,
//! mailbox and message names, ids), the fixed handlers below, and a body that reads only
//! `params`. The body is a constant, so what a script does never depends on a name.
//!
//! Architecture Invariant: a value from outside reaches a script only through `literal`, as
//! one AppleScript string literal: a backslash, a quote or a line break inside a name cannot
//! end the literal early. A mailbox called `x" & (do shell script "touch /tmp/p") & "` stays a
//! string (`tests/script.rs` checks this with a tokenizer, over generated hostile names).
//!
//! Each script runs Mail's commands under `with timeout of N seconds` and answers one JSON
//! document (built by `jsonText`, which escapes what JSON needs) as its result, which
//! `osascript` prints.

use mailbroker_core::path::split_path;

/// An AppleScript string literal holding `s` exactly: backslash and quote escaped, and the
/// characters a literal may not hold raw (line breaks, tab) as their escapes.
pub fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn flag(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "\"true\"",
        Some(false) => "\"false\"",
        None => "\"\"",
    }
}

/// A message as a script looks it up: Mail's own `id` where the index holds one (an
/// AppleScript account), then the Message-ID header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub mail_id: Option<String>,
    pub message_id: Option<String>,
}

fn targets(list: &[Target]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|t| {
            format!(
                "{{mailId:{}, messageId:{}}}",
                literal(t.mail_id.as_deref().unwrap_or_default()),
                literal(t.message_id.as_deref().unwrap_or_default())
            )
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// What an `apply` script changes on each target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub read: Option<bool>,
    pub flagged: Option<bool>,
    /// A mailbox path (`Archive`, `Clients/Acme`).
    pub move_to: Option<String>,
}

/// The account's mailboxes: each one's path, message count and newest arrival, and which
/// are its junk and trash mailboxes.
pub fn mailboxes(account: &str, timeout: u32) -> String {
    let params = format!("{{acctName:{}}}", literal(account));
    assemble("mailboxes", &params, timeout, MAILBOXES)
}

/// Metadata of messages `first..=last` (1-based) of one mailbox.
pub fn messages(account: &str, mailbox: &str, first: u64, last: u64, timeout: u32) -> String {
    let params = format!(
        "{{acctName:{}, boxPath:{}, firstIndex:{first}, lastIndex:{last}}}",
        literal(account),
        path_literal(Some(mailbox))
    );
    assemble("messages", &params, timeout, MESSAGES)
}

/// Sets read and flagged status and moves each target, then reads each back: its status
/// and the mailbox it is in now.
pub fn apply(
    account: &str,
    mailbox: &str,
    list: &[Target],
    change: &Change,
    timeout: u32,
) -> String {
    let params = format!(
        "{{acctName:{}, boxPath:{}, wantRead:{}, wantFlagged:{}, movePath:{}, targets:{}}}",
        literal(account),
        path_literal(Some(mailbox)),
        flag(change.read),
        flag(change.flagged),
        path_literal(change.move_to.as_deref()),
        targets(list)
    );
    assemble("apply", &params, timeout, APPLY)
}

/// The params of a script over some messages of one mailbox.
fn in_mailbox(account: &str, mailbox: &str, list: &[Target]) -> String {
    format!(
        "{{acctName:{}, boxPath:{}, targets:{}}}",
        literal(account),
        path_literal(Some(mailbox)),
        targets(list)
    )
}

/// Deletes each target (Mail moves it to the account's trash), then reads back where it is.
pub fn delete(account: &str, mailbox: &str, list: &[Target], timeout: u32) -> String {
    assemble(
        "delete",
        &in_mailbox(account, mailbox, list),
        timeout,
        DELETE,
    )
}

/// The raw source of each target (Mail's `source` of a message).
pub fn sources(account: &str, mailbox: &str, list: &[Target], timeout: u32) -> String {
    assemble(
        "sources",
        &in_mailbox(account, mailbox, list),
        timeout,
        SOURCES,
    )
}

/// A draft Mail.app is to save: a reply to `original` (in `mailbox`), or a new message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraftScript<'a> {
    pub drafts: &'a str,
    pub original: Option<(&'a str, Target)>,
    pub reply_all: bool,
    /// Each recipient's address and name (empty when none).
    pub to: Vec<(&'a str, &'a str)>,
    pub cc: Vec<(&'a str, &'a str)>,
    pub subject: &'a str,
    pub body: &'a str,
    pub sender: &'a str,
}

fn recipients(list: &[(&str, &str)]) -> String {
    let items: Vec<String> = (list.iter())
        .map(|(address, name)| format!("{{addr:{}, nm:{}}}", literal(address), literal(name)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// Saves a draft in the account's drafts mailbox, never sending it: Mail's `reply` to the
/// original (so Mail threads it) or a new outgoing message, its recipients, subject and body
/// made ours, then `save`; answers the one message that appeared in the drafts mailbox.
pub fn draft(account: &str, d: &DraftScript<'_>, timeout: u32) -> String {
    let (box_path, original) = match &d.original {
        Some((mailbox, t)) => (
            path_literal(Some(mailbox)),
            targets(std::slice::from_ref(t)),
        ),
        None => (path_literal(None), "{}".to_string()),
    };
    let params = format!(
        "{{acctName:{}, draftsPath:{}, boxPath:{box_path}, original:{original}, replyAll:{}, \
         toList:{}, ccList:{}, subjectText:{}, bodyText:{}, senderText:{}}}",
        literal(account),
        path_literal(Some(d.drafts)),
        flag(Some(d.reply_all)),
        recipients(&d.to),
        recipients(&d.cc),
        literal(d.subject),
        literal(d.body),
        literal(d.sender)
    );
    assemble("draft", &params, timeout, DRAFT)
}

/// Deletes the draft `target` from the drafts mailbox, if it is still there as saved.
pub fn remove_draft(account: &str, drafts: &str, target: &Target, timeout: u32) -> String {
    let params = in_mailbox(account, drafts, std::slice::from_ref(target));
    assemble("remove_draft", &params, timeout, REMOVE_DRAFT)
}

/// A mailbox path as the list of names along it (`{"Clients", "Acme"}`), each a literal: a
/// name may hold a slash (`mailbroker_core::path`). No path is the empty list.
fn path_literal(path: Option<&str>) -> String {
    let names: Vec<String> = path
        .map(|p| split_path(p).iter().map(|n| literal(n)).collect())
        .unwrap_or_default();
    format!("{{{}}}", names.join(", "))
}

fn assemble(kind: &str, params: &str, timeout: u32, body: &str) -> String {
    format!(
        "-- mailbroker {kind}\nset params to {params}\n{HANDLERS}\nwith timeout of {timeout} seconds\n{body}\nend timeout\n"
    )
}

/// Handlers every script shares: JSON text, epoch seconds, finding a mailbox by the names
/// along its path (a list: a name may hold a slash) and a message by id (one whose
/// Message-ID is not the target's is not it: 4001) or by Message-ID (which senders choose:
/// several that share it are none, 4002), then by Message-ID (separate `whose` clauses: Mail answers a
/// combined one slowly or not at all), the junk mailbox with its name fallbacks, and the
/// read-back of a message where a move or deletion sent it (`landed`).
const HANDLERS: &str = r#"on jsonText(s)
	if s is missing value then return "null"
	set s to s as text
	set out to ""
	repeat with c in (characters of s)
		set c to c as text
		set n to id of c
		if c is "\"" then
			set out to out & "\\\""
		else if c is "\\" then
			set out to out & "\\\\"
		else if n < 32 then
			set out to out & "\\u" & my hex4(n)
		else
			set out to out & c
		end if
	end repeat
	return "\"" & out & "\""
end jsonText
on hex4(n)
	set digits to "0123456789abcdef"
	set out to ""
	repeat 4 times
		set out to (character ((n mod 16) + 1) of digits) & out
		set n to n div 16
	end repeat
	return out
end hex4
on jsonBool(b)
	if b then return "true"
	return "false"
end jsonBool
on epochOf(d)
	if d is missing value then return "null"
	set base to current date
	set day of base to 1
	set year of base to 1970
	set month of base to January
	set day of base to 1
	set time of base to 0
	return (((d - base) - (time to GMT)) div 1) as text
end epochOf
on joinList(xs, sep)
	set saved to AppleScript's text item delimiters
	set AppleScript's text item delimiters to sep
	set out to xs as text
	set AppleScript's text item delimiters to saved
	return out
end joinList
on findMailbox(acct, p)
	tell application "Mail"
		if p is {"INBOX"} then
			repeat with b in (mailboxes of acct)
				if name of b is "INBOX" then return b
			end repeat
		end if
		set here to missing value
		repeat with part in p
			set part to part as text
			set found to missing value
			if here is missing value then
				set pool to mailboxes of acct
			else
				set pool to mailboxes of here
			end if
			repeat with b in pool
				if name of b is part then
					set found to contents of b
					exit repeat
				end if
			end repeat
			if found is missing value then error "no mailbox " & my joinList(p, "/") number -1728
			set here to found
		end repeat
		return here
	end tell
end findMailbox
on junkOf(acct)
	tell application "Mail"
		try
			set j to junk mailbox of acct
			if j is not missing value then return j
		end try
		repeat with n in {{"Junk"}, {"Spam"}, {"Bulk Mail"}, {"[Gmail]", "Spam"}}
			try
				return my findMailbox(acct, contents of n)
			end try
		end repeat
	end tell
	error "no junk mailbox" number -1728
end junkOf
on pathOf(b)
	tell application "Mail"
		set p to {name of b}
		try
			set c to container of b
			repeat while class of c is mailbox
				set beginning of p to name of c
				set c to container of c
			end repeat
		end try
		return p
	end tell
end pathOf
on jsonPath(b)
	set out to {}
	repeat with n in my pathOf(b)
		set end of out to my jsonText(contents of n)
	end repeat
	return "[" & my joinList(out, ",") & "]"
end jsonPath
on findMessage(box, t)
	tell application "Mail"
		if mailId of t is not "" then
			set hits to (messages of box whose id is ((mailId of t) as integer))
			if (count of hits) > 0 then
				set m to item 1 of hits
				if messageId of t is not "" and (message id of m) is not (messageId of t) then error "another message has this id now" number 4001
				return m
			end if
		end if
		if messageId of t is not "" then
			set hits to (messages of box whose message id is (messageId of t))
			if (count of hits) > 1 then error ((count of hits) as text) & " messages there share its Message-ID" number 4002
			if (count of hits) > 0 then return item 1 of hits
		end if
	end tell
	return missing value
end findMessage
on stateOf(m, t)
	tell application "Mail"
		set b to mailbox of m
		return "{\"mail_id\":" & my jsonText((id of m) as text) & ",\"message_id\":" & my jsonText(messageId of t) & ",\"found\":true,\"read\":" & my jsonBool(read status of m) & ",\"flagged\":" & my jsonBool(flagged status of m) & ",\"mailbox\":" & my jsonPath(b) & "}"
	end tell
end stateOf
on failed(t, msg, num)
	return "{\"mail_id\":" & my jsonText(mailId of t) & ",\"message_id\":" & my jsonText(messageId of t) & ",\"found\":false,\"error\":" & my jsonText(msg) & ",\"number\":" & num & "}"
end failed
on lost(t, msg)
	return "{\"mail_id\":" & my jsonText(mailId of t) & ",\"message_id\":" & my jsonText(messageId of t) & ",\"found\":false,\"lost\":true,\"error\":" & my jsonText(msg) & "}"
end lost
on unsure(t, msg)
	return "{\"mail_id\":" & my jsonText(mailId of t) & ",\"message_id\":" & my jsonText(messageId of t) & ",\"found\":false,\"unknown\":true,\"error\":" & my jsonText(msg) & "}"
end unsure
on landed(box, t, missing)
	try
		set m to my findMessage(box, {mailId:"", messageId:messageId of t})
	on error msg number 4002
		return my unsure(t, msg)
	end try
	if m is missing value then return my lost(t, missing)
	return my stateOf(m, t)
end landed"#;

const MAILBOXES: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set out to {}
	repeat with b in (every mailbox of acct)
		set n to count of messages of b
		set newest to "null"
		if n > 0 then
			set newest to 0
			repeat with d in (date received of every message of b)
				set e to (my epochOf(contents of d)) as integer
				if e > newest then set newest to e
			end repeat
		end if
		set end of out to "{\"path\":" & my jsonPath(b) & ",\"count\":" & n & ",\"newest\":" & newest & "}"
	end repeat
	set junkPath to "null"
	try
		set junkPath to my jsonPath(my junkOf(acct))
	end try
	set trashPath to "null"
	try
		set trashPath to my jsonPath(trash mailbox of acct)
	end try
	return "{\"mailboxes\":[" & my joinList(out, ",") & "],\"junk\":" & junkPath & ",\"trash\":" & trashPath & "}"
end tell"#;

const MESSAGES: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set box to my findMailbox(acct, boxPath of params)
	set total to count of messages of box
	set a to firstIndex of params
	set z to lastIndex of params
	if z > total then set z to total
	set out to {}
	if a ≤ z then
		set some to messages a thru z of box
		repeat with m in some
			set end of out to "{\"mail_id\":" & my jsonText((id of m) as text) & ",\"message_id\":" & my jsonText(message id of m) & ",\"subject\":" & my jsonText(subject of m) & ",\"sender\":" & my jsonText(sender of m) & ",\"date\":" & my epochOf(date received of m) & ",\"read\":" & my jsonBool(read status of m) & ",\"flagged\":" & my jsonBool(flagged status of m) & "}"
		end repeat
	end if
	return "{\"total\":" & total & ",\"messages\":[" & my joinList(out, ",") & "]}"
end tell"#;

const APPLY: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set box to my findMailbox(acct, boxPath of params)
	set dest to missing value
	if (count of (movePath of params)) > 0 then
		set dest to my findMailbox(acct, movePath of params)
	end if
	set out to {}
	repeat with t in (targets of params)
		try
			set m to my findMessage(box, t)
			if m is missing value then error "not found" number -1728
			if wantRead of params is "true" then set read status of m to true
			if wantRead of params is "false" then set read status of m to false
			if wantFlagged of params is "true" then set flagged status of m to true
			if wantFlagged of params is "false" then set flagged status of m to false
			if dest is not missing value then
				set mailbox of m to dest
				set end of out to my landed(dest, t, "not in " & my joinList(movePath of params, "/") & " after the move")
			else
				set end of out to my stateOf(m, t)
			end if
		on error msg number num
			set end of out to my failed(t, msg, num)
		end try
	end repeat
	return "{\"results\":[" & my joinList(out, ",") & "]}"
end tell"#;

const DELETE: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set box to my findMailbox(acct, boxPath of params)
	set bin to trash mailbox of acct
	set out to {}
	repeat with t in (targets of params)
		try
			set m to my findMessage(box, t)
			if m is missing value then error "not found" number -1728
			delete m
			set end of out to my landed(bin, t, "not in the trash after the deletion")
		on error msg number num
			set end of out to my failed(t, msg, num)
		end try
	end repeat
	return "{\"results\":[" & my joinList(out, ",") & "]}"
end tell"#;

const SOURCES: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set box to my findMailbox(acct, boxPath of params)
	set out to {}
	repeat with t in (targets of params)
		try
			set m to my findMessage(box, t)
			if m is not missing value then set end of out to "{\"mail_id\":" & my jsonText((id of m) as text) & ",\"source\":" & my jsonText(source of m) & "}"
		end try
	end repeat
	return "{\"results\":[" & my joinList(out, ",") & "]}"
end tell"#;

const DRAFT: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set drafts to my findMailbox(acct, draftsPath of params)
	set before to id of (messages of drafts whose subject is (subjectText of params))
	if (count of (boxPath of params)) > 0 then
		set orig to my findMessage(my findMailbox(acct, boxPath of params), item 1 of (original of params))
		if orig is missing value then error "the message it answers is not there" number -1728
		set m to reply orig opening window false reply to all ((replyAll of params) is "true")
		delete every to recipient of m
		delete every cc recipient of m
		set subject of m to (subjectText of params)
		set content of m to (bodyText of params)
	else
		set m to make new outgoing message with properties {subject:(subjectText of params), content:(bodyText of params), visible:false}
	end if
	if (senderText of params) is not "" then set sender of m to (senderText of params)
	tell m
		repeat with r in (toList of params)
			make new to recipient at end of to recipients with properties {address:(addr of r), name:(nm of r)}
		end repeat
		repeat with r in (ccList of params)
			make new cc recipient at end of cc recipients with properties {address:(addr of r), name:(nm of r)}
		end repeat
	end tell
	save m
	set made to {}
	repeat 20 times
		set made to {}
		repeat with d in (messages of drafts whose subject is (subjectText of params))
			if before does not contain (id of d) then set end of made to contents of d
		end repeat
		if (count of made) > 0 then exit repeat
		delay 0.5
	end repeat
	if (count of made) is not 1 then return "{\"saved\":" & (count of made) & "}"
	set d to item 1 of made
	return "{\"saved\":1,\"mail_id\":" & my jsonText((id of d) as text) & ",\"message_id\":" & my jsonText(message id of d) & ",\"mailbox\":" & my jsonPath(mailbox of d) & ",\"read\":" & my jsonBool(read status of d) & ",\"flagged\":" & my jsonBool(flagged status of d) & "}"
end tell"#;

const REMOVE_DRAFT: &str = r#"tell application "Mail"
	set acct to account (acctName of params)
	set box to my findMailbox(acct, boxPath of params)
	set t to item 1 of (targets of params)
	try
		set m to my findMessage(box, t)
	on error msg number num
		return my failed(t, msg, num)
	end try
	if m is missing value then return my failed(t, "not in the drafts mailbox", -1728)
	delete m
	set again to my findMessage(box, {mailId:"", messageId:messageId of t})
	return "{\"found\":true,\"gone\":" & my jsonBool(again is missing value) & "}"
end tell"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_escapes_what_would_end_it() {
        assert_eq!(literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(literal("line\nbreak\r"), r#""line\nbreak\r""#);
        assert_eq!(literal("Café ¬ & é"), "\"Café ¬ & é\"");
    }

    #[test]
    fn every_script_names_its_kind_and_sets_params_once() {
        let t = [Target {
            mail_id: Some("12".into()),
            message_id: Some("<a@b>".into()),
        }];
        for (kind, script) in [
            ("mailboxes", mailboxes("Work", 30)),
            ("messages", messages("Work", "INBOX", 1, 50, 30)),
            ("apply", apply("Work", "INBOX", &t, &Change::default(), 30)),
            ("delete", delete("Work", "INBOX", &t, 30)),
            ("sources", sources("Work", "INBOX", &t, 30)),
            ("draft", draft("Work", &DraftScript::default(), 30)),
            ("remove_draft", remove_draft("Work", "Drafts", &t[0], 30)),
        ] {
            assert!(script.starts_with(&format!("-- mailbroker {kind}\n")));
            assert_eq!(script.matches("set params to").count(), 1);
            assert!(script.contains("with timeout of 30 seconds"));
        }
    }
}
