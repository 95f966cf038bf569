//! The fake `osascript` answers a generated script as Mail.app would. Being an integration
//! test of this package, it also makes `cargo test --workspace` build the fake before any
//! test that points mailbroker at it runs.

use std::io::Write;
use std::process::{Command, Stdio};

use mailbroker_testkit::applescript::{FakeMail, message};
use serde_json::json;

#[test]
fn the_fake_reads_the_script_on_stdin_and_answers_json() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeMail::new(
        dir.path(),
        json!({ "Work": { "mailboxes": { "INBOX": [message(1, "a@b", "Hi", false)] },
            "junk": null, "trash": null } }),
    );
    assert_eq!(
        fake.program.parent().unwrap(),
        dir.path(),
        "a wrapper in the test's directory"
    );
    let fake_bin = env!("CARGO_BIN_EXE_fake-osascript");
    assert!(std::path::Path::new(fake_bin).is_file());
    let script = "-- mailbroker mailboxes\nset params to {acctName:\"Work\"}\nreturn \"\"\n";
    let mut child = Command::new(&fake.program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["mailboxes"][0]["path"], json!(["INBOX"]));
    assert_eq!(answer["mailboxes"][0]["count"], 1);
    assert_eq!(fake.kinds(), ["mailboxes"]);
}
