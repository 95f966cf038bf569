//! Secrets at rest in the OS keyring: a private Secret Service (gnome-keyring on a D-Bus of
//! the test's own) holds the account password, the index holds only the entry's name, and
//! every command reads it from there. Without a keyring the index holds it, and says so.

mod common;

use common::{add_args, mb_with, server};
use mailbroker_testkit::PASSWORD;
use mailbroker_testkit::secret_service::SecretService;

/// Every byte of the index (and its WAL), to look for a secret in.
fn index_bytes(home: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for name in ["index.sqlite3", "index.sqlite3-wal"] {
        if let Ok(bytes) = std::fs::read(home.join(name)) {
            all.extend(bytes);
        }
    }
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn the_password_rests_in_the_os_keyring_where_there_is_one() {
    let Some(server) = server() else { return };
    if !SecretService::available() {
        return;
    }
    let keyring = SecretService::start().unwrap();
    let env: Vec<(&str, String)> = keyring
        .env()
        .into_iter()
        .chain([("MAILBROKER_SECRET_STORE", "auto".to_string())])
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::seed(server, "kr-user", "INBOX", 3).await;
    let home = tempfile::tempdir().unwrap();
    let mut args = add_args("k", "127.0.0.1", server.imap_port, "kr-user");
    args.extend(["--tls", "none"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let added = mb_with(home.path(), &args, &env);
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert_eq!(
        added.json["account"]["secret_store"], "keyring",
        "{}",
        added.stdout
    );
    assert!(
        !holds(&index_bytes(home.path()), PASSWORD),
        "the password is in the index"
    );
    // Every command finds it there.
    let synced = mb_with(home.path(), &["sync"], &env);
    assert_eq!(synced.code, 0, "{}", synced.stdout);
    assert_eq!(synced.json["accounts"][0]["added"], 3, "{}", synced.stdout);
    // Without the keyring the secret cannot be read: a clear error, not a wrong login.
    let gone = mb_with(
        home.path(),
        &["sync"],
        &[("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent")],
    );
    assert_eq!(gone.code, 4, "{}", gone.stdout);
    assert!(
        gone.json["next_step"].as_str().unwrap().contains("keyring"),
        "{}",
        gone.stdout
    );
    // Removing the account removes its entry; adding it again makes a new one.
    assert_eq!(
        mb_with(home.path(), &["account", "remove", "k"], &env).code,
        0
    );
    let again = mb_with(home.path(), &args, &env);
    assert_eq!(
        again.json["account"]["secret_store"], "keyring",
        "{}",
        again.stdout
    );
}

#[tokio::test]
async fn without_a_keyring_the_index_holds_the_secret_and_says_so() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut args = add_args("i", "127.0.0.1", server.imap_port, "kr-none");
    args.extend(["--tls", "none"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [
        ("MAILBROKER_SECRET_STORE", "auto"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent"),
    ];
    let added = mb_with(home.path(), &args, &env);
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert_eq!(
        added.json["account"]["secret_store"], "index",
        "{}",
        added.stdout
    );
    let insisted = mb_with(
        home.path(),
        &args
            .iter()
            .map(|a| if *a == "i" { "j" } else { a })
            .collect::<Vec<_>>(),
        &[
            ("MAILBROKER_SECRET_STORE", "keyring"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent"),
        ],
    );
    assert_eq!(insisted.code, 4, "{}", insisted.stdout);
    assert_eq!(insisted.json["error_type"], "provider_unavailable");
}

/// With a keyring that is there but does not answer, `account add` used to store the password
/// in the index without a word (exit 0). Left to choose, mailbroker now refuses, saying what
/// to do; the index holds secrets only where there is no keyring at all, or when asked to.
/// An account whose keyring cannot be reached can still be removed, with a warning that its
/// entry remains.
#[tokio::test]
async fn a_keyring_that_fails_is_never_silently_replaced_by_the_index() {
    let Some(server) = server() else { return };
    if !SecretService::available() {
        return;
    }
    let keyring = SecretService::start().unwrap();
    let env_of = |store: &str| -> Vec<(&'static str, String)> {
        keyring
            .env()
            .into_iter()
            .chain([("MAILBROKER_SECRET_STORE", store.to_string())])
            .collect()
    };
    let auto = env_of("auto");
    let auto: Vec<(&str, &str)> = auto.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let home = tempfile::tempdir().unwrap();
    let args = |id: &str| {
        let mut args = add_args(id, "127.0.0.1", server.imap_port, "kr-down");
        args.extend(["--tls", "none"].map(String::from));
        args
    };
    let kept = args("kept");
    let kept: Vec<&str> = kept.iter().map(String::as_str).collect();
    assert_eq!(mb_with(home.path(), &kept, &auto).code, 0);

    keyring.freeze(true);
    let down = args("down");
    let down: Vec<&str> = down.iter().map(String::as_str).collect();
    let refused = mb_with(home.path(), &down, &auto);
    assert_eq!(refused.code, 4, "{}", refused.stdout);
    assert_eq!(refused.json["error_type"], "provider_unavailable");
    let step = refused.json["next_step"].as_str().unwrap();
    assert!(step.contains("MAILBROKER_SECRET_STORE=index"), "{step}");
    assert!(
        !holds(&index_bytes(home.path()), PASSWORD),
        "the password went to the index"
    );
    let listed = mb_with(home.path(), &["account", "list"], &auto);
    assert_eq!(
        listed.json["accounts"].as_array().unwrap().len(),
        1,
        "{}",
        listed.stdout
    );

    // Asked for, the index holds it, and `account show` says where it rests.
    let index = env_of("index");
    let index: Vec<(&str, &str)> = index.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(mb_with(home.path(), &down, &index).code, 0);
    let shown = common::mb_text(home.path(), &["account", "show", "down"]);
    assert!(
        shown.stdout.contains("secret in the index"),
        "{}",
        shown.stdout
    );

    // The keyring still hangs: the account it holds the secret of is removed all the same.
    let removed = mb_with(home.path(), &["account", "remove", "kept"], &auto);
    assert_eq!(removed.code, 0, "{}\n{}", removed.stdout, removed.stderr);
    assert_eq!(
        removed.json["keyring_entries_left"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let listed = mb_with(home.path(), &["account", "list"], &auto);
    let ids: Vec<&str> = listed.json["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["down"]);
    keyring.freeze(false);
}
