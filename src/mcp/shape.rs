//! How a tool's answer is shaped for every client: the data once, as structured content,
//! with one line of text beside it; and an error as the same kind of result, with the SPEC
//! §10 fields (the output schemas in `schema.rs` admit both).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

use mailbroker_core::{Error, Result};

/// One line saying what a result holds, for the text beside its structured content.
pub trait Brief {
    fn brief(&self) -> String;
}

/// A tool's success: the typed output as structured content (it carries `success`), and
/// its brief as the text.
pub fn success<T: serde::Serialize + Brief>(value: &T) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(v) => with_text(CallToolResult::structured(v), value.brief()),
        Err(e) => failure(&Error::internal(format!("cannot encode the result: {e}"))),
    }
}

/// A tool's failure as MCP wants it: a result with `isError` and the SPEC §10 fields, never
/// a JSON-RPC error (those are for protocol faults).
pub fn failure(e: &Error) -> CallToolResult {
    tracing::info!(error_type = e.error_type(), "tool error: {}", e.message());
    let mut body = json!({
        "success": false,
        "error": e.message(),
        "error_type": e.error_type(),
    });
    let step = next_step(e);
    let text = format!("{}: {} (next: {step})", e.error_type(), e.message());
    body["next_step"] = step.into();
    with_text(CallToolResult::structured_error(body), text)
}

/// The error's next step, written for an assistant; every error has one.
pub fn next_step(e: &Error) -> String {
    e.next_step()
        .map(for_mcp)
        .unwrap_or_else(|| default_step(e).to_string())
}

/// `result` with `text` as its one text block instead of its structured content repeated.
fn with_text(mut result: CallToolResult, text: String) -> CallToolResult {
    result.content = vec![ContentBlock::text(text)];
    result
}

/// A next step written for the CLI, for an assistant instead: what it can do itself names
/// the tool that does it; what only the person can do (log in, run a deletion) is asked of
/// them, with the command.
pub(crate) fn for_mcp(step: &str) -> String {
    const TOOLS: [(&str, &str); 14] = [
        ("run: mailbroker sync", "call sync_accounts"),
        (
            "run: mailbroker search QUERY to find message ids",
            "find message ids with search_messages",
        ),
        (
            "check the query with: mailbroker search QUERY",
            "check the query with search_messages",
        ),
        ("find ids with search,", "find ids with search_messages,"),
        ("run: mailbroker account list", "call list_accounts"),
        ("run: mailbroker account show", "call list_mailboxes for"),
        ("run: mailbroker changes ", "call list_changes with id "),
        ("run: mailbroker changes", "call list_changes"),
        ("run: mailbroker undo ", "call undo_change with change_id "),
        (
            "run: mailbroker stage-delete QUERY",
            "call update_message with delete: \"trash\" or \"permanent\"",
        ),
        (
            "check it with --dry-run, then add --yes",
            "call again with dry_run: true first",
        ),
        (
            "give at least one of --read/--unread, --flag/--unflag, --add-tag, --remove-tag, --move-to",
            "give at least one of read, flagged, add_tags, remove_tags, move_to",
        ),
        ("run the request again", "call the tool again"),
        ("repeat the request", "call the tool again"),
    ];
    let mut step = step.to_string();
    for (cli, mcp) in TOOLS {
        step = step.replace(cli, mcp);
    }
    // What is left is the person's to run, unless the step already says who runs it.
    let mut out = String::with_capacity(step.len() + 20);
    let mut rest = step.as_str();
    while let Some(at) = rest.find("run: mailbroker") {
        out.push_str(&rest[..at]);
        if !out.ends_with("to ") {
            out.push_str("ask the user to ");
        }
        out.push_str("run: mailbroker");
        rest = &rest[at + "run: mailbroker".len()..];
    }
    out.push_str(rest);
    out
}

/// The next step of an error that names none.
fn default_step(e: &Error) -> &'static str {
    match e {
        Error::Validation(_) => "check the arguments against the tool's description",
        Error::NotFound(_) => {
            "check the id or name with list_accounts, list_mailboxes or search_messages"
        }
        Error::Unsupported(_) => "tell the user this account cannot do that",
        Error::AuthRequired(_) => "ask the user to run: mailbroker account login ACCOUNT",
        Error::InsufficientScope(_) => {
            "ask the user to run: mailbroker account upgrade-scope ACCOUNT"
        }
        Error::RateLimited(_) | Error::ProviderUnavailable(_) => {
            "wait a minute and call the tool again"
        }
        Error::OutcomeUnknown(_) => {
            "call the tool again: it re-reads the server first and sends nothing twice"
        }
        Error::ProviderWriteFailed(_) | Error::VerificationFailed(_) | Error::StaleState(_) => {
            "call sync_accounts, then search again and repeat what is still needed"
        }
        Error::ConfirmationRequired(_) | Error::ConfirmationDeclined(_) => {
            "ask the user whether to go ahead"
        }
        Error::LimitExceeded(_) => "narrow the selection and try again",
        Error::WritesDisabled(_) => "tell the user this server only reads",
        Error::Internal(_) => "tell the user: this is mailbroker's fault, not theirs",
    }
}

pub fn respond<T: serde::Serialize + Brief>(outcome: Result<T>) -> CallToolResult {
    match outcome {
        Ok(v) => success(&v),
        Err(e) => failure(&e),
    }
}

/// Our tools answer every failure with structured content (`failure`); an error result
/// without it comes from rmcp itself, which refuses arguments that do not deserialize into
/// the tool's input type with a bare text. That becomes a `validation_error` with a next
/// step, like every other bad input.
pub fn argument_error(tool: &str, result: CallToolResult) -> CallToolResult {
    if result.is_error != Some(true) || result.structured_content.is_some() {
        return result;
    }
    let text: Vec<String> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    failure(
        &Error::validation(format!("{tool}: {}", text.join(" ")))
            .with_next_step("check the arguments' names and types against the tool's inputSchema"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_steps_name_tools_or_ask_the_person() {
        assert_eq!(
            for_mcp("run: mailbroker sync, then repeat the request"),
            "call sync_accounts, then call the tool again"
        );
        assert_eq!(
            for_mcp("run: mailbroker account login work"),
            "ask the user to run: mailbroker account login work"
        );
        assert_eq!(
            for_mcp("run: mailbroker account show work"),
            "call list_mailboxes for work"
        );
        assert_eq!(
            for_mcp("to redo it, run: mailbroker undo 7; to see it, run: mailbroker changes 7"),
            "to redo it, call undo_change with change_id 7; to see it, call list_changes with id 7"
        );
        let asked = "ask them to run: mailbroker approve T; then call again";
        assert_eq!(for_mcp(asked), asked);
        let e = failure(&Error::validation("bad"));
        assert!(e.structured_content.unwrap()["next_step"].is_string());
    }
}
