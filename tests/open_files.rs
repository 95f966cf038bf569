//! A node given more accounts than its open files hold while it runs (accounts added after
//! its start, which checked the index as it was): it watches as many as fit, leaves the rest
//! unwatched, and says so once, with the limit to raise.

mod common;

use std::time::Duration;

use common::serve::{Serve, watched_by, within};
use common::server;
use mailbroker_testkit::message;

/// Accounts `serve` may watch with 300 open files: (300 - 256 spare) / 2 a watched account.
const FIT: usize = 22;

fn watching(home: &std::path::Path) -> usize {
    watched_by(home)
        .first()
        .map_or(0, |(_, accounts)| accounts.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_added_past_a_nodes_open_files_are_left_unwatched_and_said_once() {
    let Some(dovecot) = server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mail = (0..3).map(|i| message(i, "a@example.test", &format!("Note {i}"), "x"));
    dovecot.import_messages("open-files", mail).unwrap();
    let add = |n: usize| {
        common::add_account(dovecot, h, &format!("f{n}"), "open-files", &[]);
    };
    (0..20).for_each(add);
    let serve = Serve::start_with_open_files(h, &["--takeover", "3"], 300);
    let all_watched = || async { watching(h) == 20 };
    within(Duration::from_secs(90), "20 accounts watched", all_watched).await;
    assert!(!serve.log().contains("limit_exceeded"), "{}", serve.log());

    (20..25).for_each(add);
    let capped = || async { watching(h) == FIT && serve.log().contains("left unwatched") };
    within(
        Duration::from_secs(90),
        "as many as fit, the rest said",
        capped,
    )
    .await;
    let log = serve.log();
    assert!(log.contains("limit_exceeded"), "{log}");
    assert!(log.contains("this node was given 25 accounts"), "{log}");
    assert!(log.contains("ulimit -n 306"), "{log}");
    // Beats go on (one a second) without watching more or saying it again. Sampled at each,
    // then awaited: under load a status once showed one fewer for a moment.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = watching(h);
        assert!(now <= FIT, "{now} watched, past the {FIT} that fit");
    }
    let fit = || async { watching(h) == FIT };
    within(Duration::from_secs(30), "as many as fit, still", fit).await;
    assert_eq!(
        serve.log().matches("left unwatched").count(),
        1,
        "{}",
        serve.log()
    );
}
