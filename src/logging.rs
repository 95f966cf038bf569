//! Logs: tracing (and the `log` records of dependencies) to stderr, every line passed through
//! `mailbroker_core::secrets::redact` first.
//!
//! Architecture Invariant: no log line carries a secret, at any level, from any crate. A
//! dependency's trace output (async-imap prints every command, LOGIN included) goes through
//! the same writer as ours.

use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

/// Logging for one process: the filter from `MAILBROKER_LOG`, else `default`.
pub fn init(default: &str) {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(Redacting)
        // Colour codes only for a person at a terminal, not in a journal or a file.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MAILBROKER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .init();
}

/// Makes a writer to stderr that redacts what it is given.
struct Redacting;

/// One event's output. The formatter hands over a whole event in one write, so a secret is
/// never split across calls.
struct RedactingWriter;

impl<'a> MakeWriter<'a> for Redacting {
    type Writer = RedactingWriter;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter
    }
}

impl Write for RedactingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let clean = mailbroker_core::secrets::redact(&text);
        std::io::stderr().lock().write_all(clean.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
