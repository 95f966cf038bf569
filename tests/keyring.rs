//! Secrets at rest in the OS keyring: a private Secret Service (gnome-keyring on a D-Bus of
//! the test's own) holds the account password, the index holds only the entry's name, and
//! every command reads it from there. Without a keyring the index holds it, and says so.

mod common;

use common::{Engine, add_args, home_on, index_bytes, mb_with, server};
use mailbroker_testkit::PASSWORD;
use mailbroker_testkit::secret_service::SecretService;

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

/// A key file (`MAILBROKER_SECRET_KEY_FILE`) seals every secret the index keeps: no byte of
/// the index holds the password, the account works with the key, and a process without it,
/// or with another key, says so and does nothing. A key file others may read is refused.
async fn a_key_file_seals_the_secrets_the_index_keeps(engine: Engine) {
    use std::os::unix::fs::PermissionsExt;
    let Some(server) = server() else { return };
    let Some(home) = home_on(engine) else { return };
    let keys = tempfile::tempdir().unwrap();
    let key_file = |name: &str, text: &str, mode: u32| {
        let path = keys.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let key = key_file("key", &format!("{}\n", "3a".repeat(32)), 0o600);
    let other = key_file("other", &"5c".repeat(32), 0o600);
    let open = key_file("open", &"3a".repeat(32), 0o644);
    let short = key_file("short", "3a3a", 0o600);
    let with = |file: &str| [("MAILBROKER_SECRET_KEY_FILE", file.to_string())];
    let run = |args: &[&str], file: &str| {
        let env = with(file);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        mb_with(home.path(), args, &env)
    };
    let mut args = add_args(
        "s",
        "127.0.0.1",
        server.imap_port,
        &format!("kr-sealed-{engine:?}"),
    );
    args.extend(["--tls", "none"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    for (file, step) in [(&open, "chmod 600"), (&short, "openssl rand -hex 32")] {
        let refused = run(&args, file);
        assert_eq!(
            refused.json["error_type"], "validation_error",
            "{}",
            refused.stdout
        );
        let next = refused.json["next_step"].as_str().unwrap_or_default();
        assert!(next.contains(step), "{next}");
    }
    let no_key = ("MAILBROKER_SECRET_KEY_FILE", "");
    let unkeyed = mb_with(
        home.path(),
        &args,
        &[("MAILBROKER_SECRET_STORE", "sealed"), no_key],
    );
    assert_eq!(
        unkeyed.json["error_type"], "validation_error",
        "{}",
        unkeyed.stdout
    );

    let added = run(&args, &key);
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert_eq!(
        added.json["account"]["secret_store"], "sealed",
        "{}",
        added.stdout
    );
    assert!(
        !holds(&index_bytes(home.path()), PASSWORD),
        "the password is in the index"
    );
    let synced = run(&["sync"], &key);
    assert_eq!(synced.code, 0, "{}\n{}", synced.stdout, synced.stderr);

    let without = mb_with(home.path(), &["sync", "--account", "s"], &[no_key]);
    assert_eq!(without.code, 3, "{}", without.stdout);
    assert_eq!(
        without.json["error_type"], "auth_required",
        "{}",
        without.stdout
    );
    let next = without.json["next_step"].as_str().unwrap_or_default();
    assert!(next.contains("MAILBROKER_SECRET_KEY_FILE"), "{next}");
    let wrong = run(&["sync", "--account", "s"], &other);
    assert_eq!(
        wrong.json["error_type"], "auth_required",
        "{}",
        wrong.stdout
    );
    assert!(
        !holds(&index_bytes(home.path()), PASSWORD),
        "the password is in the index"
    );
}

/// OAuth tokens too: a Gmail account added and refreshed with a key file leaves neither its
/// access token nor its refresh token readable in the index, and works through the refresh.
async fn oauth_tokens_are_sealed_through_a_refresh(engine: Engine) {
    use std::os::unix::fs::PermissionsExt;
    let mock = mailbroker_mock_gmail::GmailMock::start("me@mock.example")
        .await
        .unwrap();
    common::gmail::control(
        &mock,
        "seed",
        serde_json::json!({ "count": 3, "labels": ["INBOX"] }),
    )
    .await;
    let Some(home) = home_on(engine) else { return };
    let key = home.path().join("secret.key");
    std::fs::write(&key, "7e".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key = key.display().to_string();
    let env = [("MAILBROKER_SECRET_KEY_FILE", key.as_str())];
    let args = common::gmail::oauth_args(
        &mock,
        home.path(),
        &["account", "add", "gmail", "--id", "g"],
    );
    let added = common::gmail::with_browser_env(home.path(), args, &env).await;
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert_eq!(
        added.json["account"]["secret_store"], "sealed",
        "{}",
        added.stdout
    );
    common::gmail::control(
        &mock,
        "faults",
        serde_json::json!({ "expire_tokens": true }),
    )
    .await;
    let doctor = mb_with(home.path(), &["account", "doctor", "g"], &env);
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    let index = index_bytes(home.path());
    for prefix in common::gmail::TOKEN_PREFIXES {
        assert!(
            !holds(&index, prefix),
            "a token beginning {prefix} is in the index"
        );
    }
    let no_key = ("MAILBROKER_SECRET_KEY_FILE", "");
    let without = mb_with(home.path(), &["account", "doctor", "g"], &[no_key]);
    assert_eq!(
        without.json["error_type"], "auth_required",
        "{}",
        without.stdout
    );
}

/// The sealed secrets with the index on SQLite (every byte of its file and WAL scanned) and
/// on PostgreSQL (its dump scanned).
mod sealed {
    use super::*;

    #[tokio::test]
    async fn a_key_file_seals_the_secrets_the_index_keeps_on_sqlite() {
        super::a_key_file_seals_the_secrets_the_index_keeps(Engine::Sqlite).await;
    }

    #[tokio::test]
    async fn a_key_file_seals_the_secrets_the_index_keeps_on_postgres() {
        super::a_key_file_seals_the_secrets_the_index_keeps(Engine::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oauth_tokens_are_sealed_through_a_refresh_on_sqlite() {
        super::oauth_tokens_are_sealed_through_a_refresh(Engine::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oauth_tokens_are_sealed_through_a_refresh_on_postgres() {
        super::oauth_tokens_are_sealed_through_a_refresh(Engine::Postgres).await;
    }
}
