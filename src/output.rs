//! The one place that shapes what the CLI prints: JSON envelopes with `success`, human lines,
//! and errors with their SPEC §10 `error_type` and next step.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use mailbroker_core::Error;
use serde::Serialize;
use serde_json::{Value, json};

/// Prints `{ "success": true, <key>: <value> }` (or the fields of an object value) on stdout.
pub fn print_json(key: Option<&str>, value: &impl Serialize) -> Result<(), Error> {
    let value = serde_json::to_value(value).map_err(|e| Error::internal(format!("json: {e}")))?;
    let envelope = match (key, value) {
        (Some(k), v) => json!({ "success": true, k: v }),
        (None, Value::Object(mut map)) => {
            map.insert("success".into(), Value::Bool(true));
            Value::Object(map)
        }
        (None, v) => json!({ "success": true, "result": v }),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{envelope}");
    Ok(())
}

/// The error as JSON (stdout, with `--json`) or as a line for a person (stderr).
pub fn print_error(e: &Error, json: bool) {
    if json {
        let body = json!({
            "success": false,
            "error": e.message(),
            "error_type": e.error_type(),
            "next_step": e.next_step(),
        });
        println!("{body}");
    } else {
        eprintln!("error[{}]: {}", e.error_type(), e.message());
        if let Some(step) = e.next_step() {
            eprintln!("next: {step}");
        }
    }
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
