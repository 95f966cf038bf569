//! Selections that would change or stage everything by accident are refused: an empty
//! query, numbers too large to compare honestly, more terms than a query can hold. Nothing
//! is changed or staged when they are.

mod common;

use common::mcp::{client, connect, err_call};
use common::{add_account, mb, ok, seed, server};
use rmcp::model::ProtocolVersion;
use serde_json::json;

#[tokio::test]
async fn selections_that_would_take_everything_change_nothing() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let mut imap = seed(server, "sel-all", "INBOX", 10).await;
    add_account(server, home.path(), "s", "sel-all", &[]);
    ok(home.path(), &["sync"]);
    let before = imap.flags("INBOX").await.unwrap();
    let many = vec!["zebra"; 1001].join(" ");
    for query in [
        "",
        "   ",
        "larger:18446744073709551615",
        "larger:8589934592G",
        "older_than:9223372036854775807d",
        "newer_than:1é",
        many.as_str(),
    ] {
        for args in [
            vec!["update", "--query", query, "--flag", "--yes"],
            vec!["stage-delete", query],
        ] {
            let run = mb(home.path(), &args);
            assert_eq!(run.code, 2, "{query:?} {args:?}: {}", run.stdout);
            assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
        }
    }
    // A phrase with no word in it matches no message, so its negation matched every one.
    for query in [
        "-\"\"",
        "-\" \"",
        "-\"-\"",
        "-\".\"",
        "-\"@\"",
        "-\"\u{200B}\"",
        "-(\"\" OR \"\")",
        "x OR -\"\"",
    ] {
        let with_query = format!("--query={query}");
        for args in [
            vec!["update", with_query.as_str(), "--flag", "--yes"],
            vec!["stage-delete", "--dry-run", "--", query],
            vec!["search", "--", query],
        ] {
            let run = mb(home.path(), &args);
            assert_eq!(run.code, 2, "{query:?} {args:?}: {}", run.stdout);
            assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
            assert!(
                run.json["error"]
                    .as_str()
                    .unwrap()
                    .contains("no letter or digit")
            );
        }
    }
    assert_eq!(imap.flags("INBOX").await.unwrap(), before);
    let staged = ok(home.path(), &["delete-staged"]);
    assert!(
        staged["manifests"].as_array().unwrap().is_empty(),
        "{staged}"
    );

    let session = connect(home.path(), client(None, ProtocolVersion::V_2025_11_25)).await;
    for query in [
        "",
        " ",
        "larger:18446744073709551615",
        "-\"\"",
        "x OR -\" \"",
    ] {
        let body = err_call(
            &session,
            "update_message",
            json!({ "query": query, "flagged": true, "dry_run": true }),
        )
        .await;
        assert_eq!(body["error_type"], "validation_error", "{body}");
    }
    session.cancel().await.unwrap();

    // Everything, asked for in words.
    let all = ok(
        home.path(),
        &["update", "--query", "in:anywhere", "--flag", "--dry-run"],
    );
    assert_eq!(
        all["planned"].as_u64().unwrap() + all["unchanged"].as_u64().unwrap(),
        10
    );
}

#[tokio::test]
async fn limits_out_of_range_are_refused() {
    let Some(server) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    seed(server, "sel-limit", "INBOX", 3).await;
    add_account(server, home.path(), "l", "sel-limit", &[]);
    ok(home.path(), &["sync"]);
    for args in [
        ["search", "--limit", "0", "in:inbox"],
        ["search", "--limit", "100001", "in:inbox"],
        ["changes", "--limit", "0", "--json"],
    ] {
        let run = mb(home.path(), &args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert_eq!(run.json["error_type"], "validation_error", "{}", run.stdout);
    }
    let one = ok(home.path(), &["search", "--limit", "1", "in:inbox"]);
    assert_eq!(one["messages"].as_array().unwrap().len(), 1);
}
