//! The one place that shapes what the CLI prints: JSON envelopes with `success`, human lines,
//! and errors with their SPEC §10 `error_type` and next step.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use mailbroker_core::Error;
use serde::Serialize;
use serde_json::{Value, json};

/// Prints one line for a person on stdout, made safe for a terminal by `one_line`: every
/// human line that may carry text a server or a message chose (mailbox names, addresses,
/// server errors, plan lines naming mailboxes) goes through this, so none can drive the
/// terminal or forge a row.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", $crate::output::layout_line(&format!($($arg)*)))
    };
}

/// As `say!`, on stderr.
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::output::layout_line(&format!($($arg)*)))
    };
}

/// Prints `{ "success": true, <key>: <value> }` (or the fields of an object value) on stdout.
pub fn print_json(key: Option<&str>, value: &impl Serialize) -> Result<(), Error> {
    let value = serde_json::to_value(value).map_err(|e| Error::internal(format!("json: {e}")))?;
    let envelope = match (key, value) {
        (Some(k), v) => json!({ "success": true, k: v }),
        // A report that says how it went (`success` false for a partial one) keeps it.
        (None, Value::Object(mut map)) => {
            map.entry("success").or_insert(Value::Bool(true));
            Value::Object(map)
        }
        (None, v) => json!({ "success": true, "result": v }),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{envelope}");
    Ok(())
}

/// An error's SPEC §10 fields as the CLI's JSON carries them, wherever one is reported.
pub fn error_fields(e: &Error) -> serde_json::Map<String, Value> {
    match serde_json::to_value(mailbroker_core::ErrorFields::from(e)) {
        Ok(Value::Object(fields)) => fields,
        // A struct of strings always serializes to an object.
        _ => serde_json::Map::new(),
    }
}

/// The error as JSON (stdout, with `--json`) or as a line for a person (stderr).
pub fn print_error(e: &Error, json: bool) {
    if json {
        let mut body = error_fields(e);
        body.insert("success".into(), false.into());
        println!("{}", Value::Object(body));
    } else {
        crate::say_err!("error[{}]: {}", e.error_type(), e.message());
        if let Some(step) = e.next_step() {
            crate::say_err!("next: {step}");
        }
    }
}

/// `text` from a message (a header, a name) made safe to print as part of one line on a
/// terminal: every control character (ESC, BEL, CR, LF, …) is shown as its Unicode control
/// picture (`␛`) and the bidirectional overrides as `�`, so a crafted Subject can neither
/// drive the terminal nor forge a row. `--json` output keeps the data exact instead.
pub fn one_line(text: &str) -> Cow<'_, str> {
    neutralise(text, false)
}

/// As `one_line`, for a message body: line breaks and tabs stay (CRLF becomes LF).
pub fn body_text(text: &str) -> Cow<'_, str> {
    neutralise(text, true)
}

/// A line mailbroker lays out itself (`say!`): its own tabs separate columns and stay;
/// every other control character is pictured, in case a caller left server text in it
/// unescaped. Text from a server goes in through `one_line`, where a tab is pictured too,
/// so it cannot make a column of its own.
pub fn layout_line(text: &str) -> Cow<'_, str> {
    if !text.contains('\t') {
        return one_line(text);
    }
    let parts: Vec<Cow<'_, str>> = text.split('\t').map(one_line).collect();
    Cow::Owned(parts.join("\t"))
}

fn neutralise(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let kept = |c: char| keep_lines && matches!(c, '\n' | '\t');
    let unsafe_char = |c: char| {
        (c.is_control() && !kept(c))
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let text = if keep_lines {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    };
    Cow::Owned(
        text.chars()
            .map(|c| match c {
                c if !unsafe_char(c) => c,
                // C0 controls have pictures at U+2400 + code; DEL at U+2421.
                c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
                '\u{7f}' => '\u{2421}',
                _ => '\u{fffd}',
            })
            .collect(),
    )
}

/// A progress bar on stderr, shown only to a person at a terminal.
pub fn progress_bar(json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg} {pos}/{len} messages ({per_sec}) {wide_bar}")
    {
        bar.set_style(style);
    }
    bar
}

/// Asks a question on the terminal (stderr) and returns the trimmed answer from stdin.
pub fn ask(question: &str) -> Result<String, Error> {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr();
    let _ = write!(err, "{question}");
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Error::internal(format!("cannot read the answer: {e}")))?;
    Ok(answer.trim().to_string())
}

/// The person at this process's controlling terminal (`/dev/tty`), for what only a person
/// may decide: approving an assistant's write, deleting mail for good. Its questions and
/// answers go through the terminal itself, never stdin or a flag, so a program that runs
/// mailbroker without a terminal (an assistant with a shell) cannot answer them. A process of
/// the same user can still edit the index: this keeps honest programs honest, it is no
/// boundary against the user's own code.
pub struct Terminal {
    tty: std::fs::File,
}

impl Terminal {
    /// The controlling terminal, or `confirmation_required` saying `what` needs a person.
    pub fn open(what: &str) -> Result<Terminal, Error> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|_| {
                Error::confirmation_required(format!(
                    "{what} needs a person at a terminal, and this process has none"
                ))
                .with_next_step("run the command yourself, in a terminal")
            })?;
        Ok(Terminal { tty })
    }

    /// Shows `line` (made safe by `one_line`) on the terminal.
    pub fn say(&mut self, line: &str) {
        let _ = writeln!(self.tty, "{}", one_line(line));
    }

    /// Asks `question` on the terminal; the trimmed answer typed there.
    pub fn ask(&mut self, question: &str) -> Result<String, Error> {
        use std::io::BufRead;
        let _ = write!(self.tty, "{question}");
        let _ = self.tty.flush();
        let mut answer = String::new();
        std::io::BufReader::new(&self.tty)
            .read_line(&mut answer)
            .map_err(|e| Error::internal(format!("cannot read the answer: {e}")))?;
        Ok(answer.trim().to_string())
    }
}

/// Seconds since the epoch as RFC 3339 (UTC), as every listing shows times.
pub fn rfc3339(secs: i64) -> String {
    mail_parser::DateTime::from_timestamp(secs).to_rfc3339()
}

/// Each account's freshness, a few lines each, for a person: how it is watched, its last
/// sync, and what went wrong with what to do.
pub fn print_freshness(
    accounts: &std::collections::BTreeMap<String, mailbroker_engine::freshness::Watching>,
) {
    for (account, w) in accounts {
        let when = w.last_sync_at.map_or_else(|| "never".to_string(), rfc3339);
        crate::say!("  {account}: {}, last sync {when}", w.watching);
        if let Some(error) = &w.error {
            crate::say!(
                "    {}: {error}",
                w.error_type.as_deref().unwrap_or("error")
            );
        }
        if let Some(step) = &w.next_step {
            crate::say!("    next: {step}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        let subject = "hi\x1b]0;owned\x07\x1b[31mred\r\n12345 N forged row\u{202e}";
        let shown = one_line(subject);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert!(shown.contains("\u{241b}]0;owned"), "{shown:?}");
        assert!(!shown.contains('\u{202e}'));
        let body = body_text("line one\r\nline\ttwo\x1b[2J\u{9b}");
        assert_eq!(body, "line one\nline\ttwo\u{241b}[2J\u{fffd}");
        assert!(matches!(one_line("plain Grüße"), Cow::Borrowed(_)));
    }

    /// `account list` printed `ana␉imap␉-␉last sync: never`: the layout's own tabs were
    /// pictured as if they came from a server. They stay; a server's tab, escaped on its way
    /// in, and every other control character do not.
    #[test]
    fn the_layouts_tabs_stay_and_a_servers_do_not() {
        let subject = one_line("a\tforged column");
        let line = format!("42\t{subject}\tdone\x1b[2J");
        assert_eq!(
            layout_line(&line),
            "42\ta\u{2409}forged column\tdone\u{241b}[2J"
        );
        assert_eq!(
            layout_line("ana\timap\t-\tlast sync: never"),
            "ana\timap\t-\tlast sync: never"
        );
    }
}
