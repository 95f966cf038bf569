//! Starts a private Dovecot with a `demo` user holding a few dozen messages, prints one JSON
//! line with how to reach it, and runs until killed. Used by `scripts/demo`.

use mailbroker_testkit::{Dovecot, PASSWORD, message};

fn main() -> anyhow::Result<()> {
    let server = Dovecot::start()?;
    let senders = [
        "LinkedIn <messages-noreply@linkedin.example>",
        "Acme Billing <billing@acme.example>",
        "Alice Example <alice@example.test>",
        "Weekly News <news@letter.example>",
    ];
    let subjects = [
        "You appeared in 9 searches",
        "Invoice 2026-11",
        "Lunch on Friday?",
        "This week in Rust",
    ];
    let mail = (0..40).map(|i| {
        message(
            i,
            senders[i % 4],
            &format!("{} #{i}", subjects[i % 4]),
            "Hello from the demo mailbox.",
        )
    });
    server.import_messages("demo", mail)?;
    println!(
        "{}",
        serde_json::json!({
            "host": "localhost",
            "imaps_port": server.imaps_port,
            "ca_file": server.ca.ca_pem,
            "username": "demo",
            "password": PASSWORD,
        })
    );
    loop {
        std::thread::park();
    }
}
