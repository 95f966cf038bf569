//! Starts a private Dovecot with a `demo` user holding a few dozen messages, prints one JSON
//! line with how to reach it, and runs until killed. Used by `scripts/demo`; with
//! `--postgres` (`scripts/team-demo`) also a private PostgreSQL cluster with one empty
//! database, whose URL the line gives as `database_url`.

use mailbroker_testkit::{Dovecot, PASSWORD, message};

extern "C" fn exit_on_signal(_: libc::c_int) {
    // exit() runs the atexit handler that stops Dovecot and removes its files.
    unsafe { libc::exit(0) }
}

fn main() -> anyhow::Result<()> {
    let server = Dovecot::start()?;
    server.stop_at_exit();
    let cluster = match std::env::args().any(|a| a == "--postgres") {
        true => Some(mailbroker_testkit::postgres::Postgres::start()?),
        false => None,
    };
    let database_url = match &cluster {
        Some(cluster) => {
            cluster.stop_at_exit();
            Some(cluster.database()?)
        }
        None => None,
    };
    unsafe {
        libc::signal(
            libc::SIGTERM,
            exit_on_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            exit_on_signal as *const () as libc::sighandler_t,
        );
    }
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
            "database_url": database_url,
        })
    );
    loop {
        std::thread::park();
    }
}
