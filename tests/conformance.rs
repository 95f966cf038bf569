//! One scenario set every provider passes, through the real binary, with the index on SQLite
//! and again on PostgreSQL: IMAP on Dovecot and on
//! the worst-case IMAP server (GNU Mailutils imap4d), JMAP on Cyrus, Gmail and Microsoft
//! Graph on their mocks, Mail.app (AppleScript) on the fake `osascript`, each
//! from four unread INBOX messages ("Message 0" … "Message 3", from
//! alice) in a freshly synced account. A new provider adds a `Remote` variant (how to look at
//! its server and act on it as another client) and a line to `conformance!`.
//!
//! The scenarios: patch semantics (unset fields unchanged), a repeated request writes
//! nothing, a message changed elsewhere is stale and not overwritten, a lost answer is
//! never resent blindly, a move and its undo, and a staged deletion and its undo. A scenario
//! a provider's adapter refuses (tags on the Mail.app route; tags, moves and deletions on
//! imap4d, which has no keywords and neither MOVE nor UIDPLUS) asserts the refusal, before
//! anything is sent, instead of being left out.

mod common;

use std::path::Path;

use common::gmail::control;
use common::{Engine, mb_with};
use mailbroker_mock_gmail::GmailMock;
use mailbroker_mock_graph::GraphMock;
use mailbroker_testkit::applescript::FakeMail;
use mailbroker_testkit::cyrus::Cyrus;
use mailbroker_testkit::{ImapClient, Proxy, message};
use serde_json::{Value, json};

const MESSAGES: usize = 4;

/// A provider's server, seen and changed from outside mailbroker.
enum Remote {
    /// Dovecot behind a proxy that shows what mailbroker sends and can lose an answer.
    Imap { client: ImapClient, proxy: Proxy },
    /// The Gmail mock; `ids[n]` is "Message n"'s Gmail id.
    Gmail { mock: GmailMock, ids: Vec<String> },
    /// The Graph mock; `ids[n]` is "Message n"'s immutable id.
    Graph { mock: GraphMock, ids: Vec<String> },
    /// Mail.app, played by the fake `osascript`; "Message n" has Mail's id 100 + n.
    Mail { fake: FakeMail, seen: usize },
    /// Cyrus's JMAP behind a proxy that shows the requests; `ids[n]` is "Message n"'s id.
    Jmap {
        cyrus: &'static Cyrus,
        user: String,
        proxy: Proxy,
        ids: Vec<String>,
    },
}

/// What the server holds of the four messages.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    inbox: usize,
    archive: usize,
    trash: usize,
    unread: usize,
    flagged: usize,
    tagged: usize,
}

/// What a provider's adapter refuses before anything is sent, as its server cannot do it.
#[derive(Clone, Copy, Default)]
struct Refuses {
    tags: bool,
    /// Moves, and so deletions (trash mode moves; permanent mode expunges).
    moves: bool,
}

struct Fixture {
    home: tempfile::TempDir,
    remote: Remote,
    refuses: Refuses,
    /// What every command runs with (the fake `osascript` for Mail.app).
    env: Vec<(String, String)>,
    /// Writes the server had seen when last asked (`writes_since`).
    writes_seen: usize,
}

impl Fixture {
    async fn imap(user: &str) -> Option<Fixture> {
        let server = common::server()?;
        let messages = (0..MESSAGES).map(|i| {
            message(
                i,
                "alice@example.test",
                &format!("Message {i}"),
                "Conformance.",
            )
        });
        server.import_messages(user, messages).unwrap();
        let home = home()?;
        let proxy = Proxy::start(server.imap_port, std::time::Duration::ZERO).unwrap();
        common::add_proxied(home.path(), "c", proxy.port, user);
        let client = ImapClient::connect(server, user).await.unwrap();
        Some(Fixture::synced(home, Remote::Imap { client, proxy }))
    }

    /// imap4d: no SPECIAL-USE, so Archive and Trash are found by name.
    async fn imap4d(user: &str) -> Option<Fixture> {
        let server = common::imap4d()?;
        let login = server.add_user(user).unwrap();
        let mut client = ImapClient::connect_port(server.port, &login).await.unwrap();
        for mailbox in ["Archive", "Trash"] {
            client.create(mailbox).await.unwrap();
        }
        for i in 0..MESSAGES {
            let body = message(
                i,
                "alice@example.test",
                &format!("Message {i}"),
                "Conformance.",
            );
            client.append("INBOX", "", &body).await.unwrap();
        }
        let home = home()?;
        let proxy = Proxy::start(server.port, std::time::Duration::ZERO).unwrap();
        common::add_proxied(home.path(), "c", proxy.port, &login);
        let mut fixture = Fixture::synced(home, Remote::Imap { client, proxy });
        fixture.refuses = Refuses {
            tags: true,
            moves: true,
        };
        Some(fixture)
    }

    async fn jmap(user: &str) -> Option<Fixture> {
        let cyrus = mailbroker_testkit::cyrus::shared()?;
        let user = user.replace('_', "-");
        cyrus.add_user(&user).await.unwrap();
        let ids = cyrus
            .seed(&user, "Inbox", MESSAGES, "alice@example.test", &[])
            .await
            .unwrap();
        let home = home()?;
        let proxy = Proxy::start(cyrus.port, std::time::Duration::ZERO).unwrap();
        let url = format!("http://127.0.0.1:{}", proxy.port);
        let add = [
            "account",
            "add",
            "jmap",
            "--id",
            "c",
            "--url",
            &url,
            "--username",
            &user,
            "--password-env",
            "MB_TEST_PW",
        ];
        let added = common::mb(home.path(), &add);
        assert_eq!(added.code, 0, "{}", added.stdout);
        let remote = Remote::Jmap {
            cyrus,
            user,
            proxy,
            ids,
        };
        Some(Fixture::synced(home, remote))
    }

    async fn gmail() -> Option<Fixture> {
        let mock = GmailMock::start("me@mock.example").await.unwrap();
        let ids = mock.seed(MESSAGES, &["INBOX", "UNREAD"], Some("alice@example.test"));
        let home = home()?;
        common::gmail::add_account(&mock, home.path(), "c", &[]).await;
        Some(Fixture::synced(home, Remote::Gmail { mock, ids }))
    }

    async fn graph() -> Option<Fixture> {
        let mock = GraphMock::start("me@mock.example").await.unwrap();
        let ids = mock.seed(MESSAGES, "inbox", "alice@example.test", true);
        let home = home()?;
        common::graph::add_account_as(&mock, home.path(), "c").await;
        Some(Fixture::synced(home, Remote::Graph { mock, ids }))
    }

    async fn mail() -> Option<Fixture> {
        let dir = home()?;
        let inbox: Vec<Value> = (0..MESSAGES)
            .map(|i| {
                json!({ "id": 100 + i, "message_id": format!("m{i}@example.test"),
                    "subject": format!("Message {i}"), "sender": "alice@example.test",
                    "date": 1_700_000_000 + i, "read": false, "flagged": false })
            })
            .collect();
        let fake = FakeMail::new(
            dir.path(),
            json!({ "Work": { "mailboxes": { "INBOX": inbox, "Archive": [], "Trash": [] },
                "junk": null, "trash": "Trash" } }),
        );
        let env = vec![(
            "MAILBROKER_OSASCRIPT".to_string(),
            fake.program.display().to_string(),
        )];
        let add = [
            "account",
            "add",
            "applescript",
            "--id",
            "c",
            "--mail-account",
            "Work",
        ];
        let env_refs: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let added = mb_with(dir.path(), &add, &env_refs);
        assert_eq!(added.code, 0, "{}", added.stdout);
        let remote = Remote::Mail { fake, seen: 0 };
        let mut fixture = Fixture::synced_with(dir, remote, env);
        fixture.refuses.tags = true;
        Some(fixture)
    }

    fn synced(home: tempfile::TempDir, remote: Remote) -> Fixture {
        Fixture::synced_with(home, remote, Vec::new())
    }

    fn synced_with(home: tempfile::TempDir, remote: Remote, env: Vec<(String, String)>) -> Fixture {
        let mut fixture = Fixture {
            home,
            remote,
            refuses: Refuses::default(),
            env,
            writes_seen: 0,
        };
        let sync = fixture.ok(&["sync"]);
        assert_eq!(sync["accounts"][0]["added"], MESSAGES, "{sync}");
        fixture.writes_since();
        fixture
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    /// Runs `mailbroker --json ARGS…` in the fixture's home, with its environment.
    fn mb(&self, args: &[&str]) -> common::Run {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        mb_with(self.path(), args, &env)
    }

    /// As `mb`, insisting on success; the JSON.
    fn ok(&self, args: &[&str]) -> Value {
        let run = self.mb(args);
        assert_eq!(run.code, 0, "{args:?}\n{}\n{}", run.stdout, run.stderr);
        run.json
    }

    /// Whether this provider refuses tags: then `request` (which asks for one) is refused,
    /// `unsupported` before anything is sent, and the scenario ends.
    fn refuses_tags(&mut self, request: &[&str]) -> bool {
        self.refuses.tags && self.refused(request)
    }

    /// Whether this provider refuses moves (and so deletions): then `request` is refused as
    /// `refuses_tags` says.
    fn refuses_moves(&mut self, request: &[&str]) -> bool {
        self.refuses.moves && self.refused(request)
    }

    /// Asserts that `request` is refused as `unsupported`, with a next step, and that
    /// nothing reached the server; true.
    fn refused(&mut self, request: &[&str]) -> bool {
        let run = self.mb(request);
        assert_eq!(run.code, 2, "{}", run.stdout);
        assert_eq!(run.json["error_type"], "unsupported", "{}", run.stdout);
        assert!(run.json["next_step"].is_string(), "{}", run.stdout);
        assert_eq!(self.writes_since(), 0, "a refused request was sent");
        true
    }

    /// The local id of "Message n".
    fn id(&self, n: usize) -> String {
        let found = self.ok(&["search", &format!("subject:\"Message {n}\"")]);
        assert_eq!(found["total"], 1, "{found}");
        found["messages"][0]["id"].to_string()
    }

    /// How many messages the index finds for `query`.
    fn indexed(&self, query: &str) -> u64 {
        self.ok(&["search", query])["total"].as_u64().unwrap()
    }

    /// Write commands or calls the server received since the last call (Graph: message
    /// writes it applied; a conditional PATCH its If-Match refused changes nothing).
    fn writes_since(&mut self) -> usize {
        match &mut self.remote {
            // The proxy hands over what it forwarded since it was last asked.
            Remote::Imap { proxy, .. } => proxy
                .take_sent()
                .lines()
                .filter(|l| {
                    [" STORE ", " MOVE ", " COPY ", "EXPUNGE"]
                        .iter()
                        .any(|write| l.contains(write))
                })
                .count(),
            Remote::Gmail { mock, .. } => {
                let total = mock
                    .requests()
                    .iter()
                    .filter(|r| r.method != "GET" && r.path.contains("/messages/"))
                    .count();
                let new = total - self.writes_seen;
                self.writes_seen = total;
                new
            }
            Remote::Graph { mock, .. } => {
                let total: usize = mock.requests().iter().map(|r| r.writes).sum();
                let new = total - self.writes_seen;
                self.writes_seen = total;
                new
            }
            Remote::Jmap { proxy, .. } => proxy.take_sent().matches("\"Email/set\"").count(),
            Remote::Mail { fake, seen } => {
                let kinds = fake.kinds();
                let writes = kinds[(*seen).min(kinds.len())..]
                    .iter()
                    .filter(|k| *k == "apply" || *k == "delete")
                    .count();
                *seen = kinds.len();
                writes
            }
        }
    }

    /// Another client flags "Message n" on the server; the index does not know yet.
    async fn flag_elsewhere(&mut self, n: usize) {
        match &mut self.remote {
            Remote::Imap { client, .. } => {
                // Imported in order into a new mailbox: "Message n" has UID n + 1.
                let uid = n as u32 + 1;
                client
                    .store("INBOX", uid, "+FLAGS", "\\Flagged")
                    .await
                    .unwrap();
            }
            Remote::Gmail { mock, ids } => {
                control(
                    mock,
                    "modify",
                    json!({ "ids": [ids[n]], "add": ["STARRED"], "remove": [] }),
                )
                .await;
            }
            Remote::Graph { mock, ids } => {
                let change = json!({ "id": ids[n], "flag": "flagged" });
                mailbroker_testkit::oauth::control(&mock.url, "modify", change).await;
            }
            Remote::Mail { fake, .. } => fake.update(|s| {
                s["accounts"]["Work"]["mailboxes"]["INBOX"][n]["flagged"] = json!(true);
            }),
            Remote::Jmap {
                cyrus, user, ids, ..
            } => {
                let flag = json!({ "accountId": user, "update": {
                    ids[n].clone(): { "keywords/$flagged": true } } });
                cyrus
                    .call(user, json!([["Email/set", flag, "f"]]))
                    .await
                    .unwrap();
            }
        }
    }

    /// The next write's answer is lost on its way back (the write itself lands).
    async fn lose_next_write_answer(&mut self) {
        match &self.remote {
            Remote::Imap { proxy, .. } => proxy.cut_after("UID STORE"),
            Remote::Gmail { mock, .. } => {
                control(mock, "faults", json!({ "drop_after_write": 1 })).await;
            }
            Remote::Graph { mock, .. } => {
                let fault = json!({ "drop_after_write": 1 });
                mailbroker_testkit::oauth::control(&mock.url, "faults", fault).await;
            }
            Remote::Mail { .. } => panic!("the Mail.app route refuses this scenario's tag"),
            Remote::Jmap { proxy, .. } => proxy.cut_after("Email/set"),
        }
    }

    async fn counts(&mut self, tag: &str) -> Counts {
        match &mut self.remote {
            Remote::Imap { client, .. } => {
                let mut all = Vec::new();
                let mut sizes = Vec::new();
                for mailbox in ["INBOX", "Archive", "Trash"] {
                    let flags = client.flags(mailbox).await.unwrap();
                    sizes.push(flags.len());
                    all.extend(flags.into_values());
                }
                let with = |f: &str| all.iter().filter(|m| m.iter().any(|x| x == f)).count();
                Counts {
                    inbox: sizes[0],
                    archive: sizes[1],
                    trash: sizes[2],
                    unread: all.len() - with("\\Seen"),
                    flagged: with("\\Flagged"),
                    tagged: with(tag),
                }
            }
            Remote::Gmail { mock, .. } => {
                let count = |label: &str| mock.ids_with(Some(label)).len();
                let all = mock.ids_with(None);
                let archived = all
                    .iter()
                    .filter(|id| {
                        let names = mock.label_names(id);
                        !names
                            .iter()
                            .any(|l| l == "INBOX" || l == "TRASH" || l == "SPAM")
                    })
                    .count();
                // A message with TRASH is in the trash whatever else it carries.
                let inbox = all
                    .iter()
                    .filter(|id| {
                        let names = mock.label_names(id);
                        names.iter().any(|l| l == "INBOX")
                            && !names.iter().any(|l| l == "TRASH" || l == "SPAM")
                    })
                    .count();
                Counts {
                    inbox,
                    archive: archived,
                    trash: count("TRASH"),
                    unread: count("UNREAD"),
                    flagged: count("STARRED"),
                    tagged: all
                        .iter()
                        .filter(|id| mock.label_names(id).iter().any(|l| l == tag))
                        .count(),
                }
            }
            Remote::Graph { mock, .. } => {
                let all = mock.messages();
                let with = |f: &dyn Fn(&Value) -> bool| all.iter().filter(|m| f(m)).count();
                Counts {
                    inbox: mock.ids_in("inbox").len(),
                    archive: mock.ids_in("archive").len(),
                    trash: mock.ids_in("deleteditems").len(),
                    unread: with(&|m| m["isRead"] == false),
                    flagged: with(&|m| m["flag"]["flagStatus"] == "flagged"),
                    tagged: with(&|m| {
                        m["categories"]
                            .as_array()
                            .is_some_and(|c| c.iter().any(|x| x == tag))
                    }),
                }
            }
            Remote::Jmap { cyrus, user, .. } => {
                let boxes = cyrus.mailboxes(user).await.unwrap();
                let (mut sizes, mut all) = (Vec::new(), Vec::new());
                for name in ["Inbox", "Archive", "Trash"] {
                    let query = json!({ "accountId": user,
                        "filter": { "inMailbox": boxes[name] }, "limit": 1000 });
                    let get = json!({ "accountId": user, "properties": ["keywords"],
                        "#ids": { "resultOf": "q", "name": "Email/query", "path": "/ids" } });
                    let calls = json!([["Email/query", query, "q"], ["Email/get", get, "g"]]);
                    let got = cyrus.call(user, calls).await.unwrap();
                    let list = got[1][1]["list"].as_array().cloned().unwrap_or_default();
                    sizes.push(list.len());
                    all.extend(list);
                }
                let with = |k: &str| {
                    let has = |m: &&Value| {
                        let keys = m["keywords"].as_object();
                        keys.is_some_and(|o| o.keys().any(|x| x.eq_ignore_ascii_case(k)))
                    };
                    all.iter().filter(has).count()
                };
                Counts {
                    inbox: sizes[0],
                    archive: sizes[1],
                    trash: sizes[2],
                    unread: all.len() - with("$seen"),
                    flagged: with("$flagged"),
                    tagged: with(tag),
                }
            }
            Remote::Mail { fake, .. } => {
                let state = fake.read();
                let boxes = &state["accounts"]["Work"]["mailboxes"];
                let list = |name: &str| boxes[name].as_array().cloned().unwrap_or_default();
                let all: Vec<Value> = ["INBOX", "Archive", "Trash"]
                    .iter()
                    .flat_map(|b| list(b))
                    .collect();
                let with = |field: &str, v: bool| all.iter().filter(|m| m[field] == v).count();
                Counts {
                    inbox: list("INBOX").len(),
                    archive: list("Archive").len(),
                    trash: list("Trash").len(),
                    unread: with("read", false),
                    flagged: with("flagged", true),
                    // Mail.app has no tags.
                    tagged: 0,
                }
            }
        }
    }
}

fn counts(
    inbox: usize,
    archive: usize,
    trash: usize,
    unread: usize,
    flagged: usize,
    tagged: usize,
) -> Counts {
    Counts {
        inbox,
        archive,
        trash,
        unread,
        flagged,
        tagged,
    }
}

/// `update --query QUERY CHANGE… --yes` as arguments.
fn update<'a>(query: &'a str, change: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["update", "--query", query];
    args.extend(change);
    args.push("--yes");
    args
}

fn change_id(run: &Value) -> String {
    run["change_id"].as_i64().expect("a change id").to_string()
}

/// A tag added leaves read and flagged state alone; a flag set leaves the tags alone.
async fn patch_semantics(mut f: Fixture) {
    if f.refuses_tags(&update("in:inbox", &["--add-tag", "Later"])) {
        return;
    }
    let tagged = f.ok(&update("in:inbox", &["--add-tag", "Later"]));
    assert_eq!(tagged["applied"], MESSAGES, "{tagged}");
    assert_eq!(f.counts("Later").await, counts(4, 0, 0, 4, 0, 4));
    let one = f.id(1);
    let flagged = f.ok(&["update", &one, "--flag", "--yes"]);
    assert_eq!(flagged["applied"], 1, "{flagged}");
    assert_eq!(f.counts("Later").await, counts(4, 0, 0, 4, 1, 4));
    assert_eq!(f.indexed("tag:Later is:unread"), 4);
    assert_eq!(f.indexed("is:flagged tag:Later"), 1);
}

/// The same request again finds everything as asked and sends no write.
async fn repeat_writes_nothing(mut f: Fixture) {
    let request = update("from:alice", &["--add-tag", "Once", "--read"]);
    if f.refuses_tags(&request) {
        return;
    }
    let first = f.ok(&request);
    assert_eq!(first["applied"], MESSAGES, "{first}");
    assert!(f.writes_since() > 0);
    let again = f.ok(&request);
    assert_eq!(again["applied"], 0, "{again}");
    assert_eq!(again["unchanged"], MESSAGES, "{again}");
    assert_eq!(
        f.writes_since(),
        0,
        "a repeated request wrote to the server"
    );
    assert_eq!(f.counts("Once").await, counts(4, 0, 0, 0, 0, 4));
}

/// A message another client changed since the sync is stale: not overwritten, and the
/// index learns its state; the others are written.
async fn changed_elsewhere_is_stale(mut f: Fixture) {
    f.flag_elsewhere(2).await;
    let request = update("from:alice", &["--add-tag", "Later", "--unflag"]);
    if f.refuses_tags(&request) {
        return;
    }
    let run = f.mb(&request);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.json["stale"], 1, "{}", run.stdout);
    assert_eq!(run.json["applied"], MESSAGES - 1, "{}", run.stdout);
    assert_eq!(run.json["failures"][0]["error_type"], "stale_state");
    assert_eq!(f.counts("Later").await, counts(4, 0, 0, 4, 1, 3));
    let shown = f.ok(&["show", &f.id(2)]);
    assert_eq!(shown["message"]["flagged"], true, "{shown}");
}

/// The write lands but its answer is lost: the run reports it applied (verified) or of
/// unknown outcome, never anything else; a rerun finds it done and writes nothing.
async fn lost_answer_is_not_resent(mut f: Fixture) {
    let request = update("in:inbox", &["--add-tag", "Kept"]);
    if f.refuses_tags(&request) {
        return;
    }
    f.lose_next_write_answer().await;
    let first = f.mb(&request);
    let applied = first.json["applied"].as_u64().unwrap_or(0);
    let unknown = first.json["failures"].as_array().map_or(0, |all| {
        all.iter()
            .filter(|x| x["error_type"] == "outcome_unknown")
            .count()
    });
    assert_eq!(applied as usize + unknown, MESSAGES, "{}", first.stdout);
    assert_eq!(f.counts("Kept").await.tagged, MESSAGES, "the write landed");
    f.writes_since();
    let rerun = f.ok(&request);
    assert_eq!(rerun["applied"], 0, "{rerun}");
    assert_eq!(rerun["unchanged"], MESSAGES, "{rerun}");
    assert_eq!(f.writes_since(), 0, "resent after a lost answer");
    assert_eq!(f.indexed("tag:Kept"), MESSAGES as u64);
    // The rerun read the lost write back: the first change now says applied for all, and
    // can be undone (its unknown items were never undoable).
    let first_id = change_id(&first.json);
    let journal = f.ok(&["changes", &first_id]);
    assert_eq!(journal["change"]["applied"], MESSAGES, "{journal}");
    let undone = f.ok(&["undo", &first_id]);
    assert_eq!(undone["applied"], MESSAGES, "{undone}");
    assert_eq!(
        f.counts("Kept").await.tagged,
        0,
        "the undo reached the server"
    );
}

/// A move to the archive, and its undo back to the inbox.
async fn move_and_undo(mut f: Fixture) {
    let request = update("in:inbox", &["--move-to", "archive"]);
    if f.refuses_moves(&request) {
        assert_eq!(f.counts("x").await, counts(4, 0, 0, 4, 0, 0));
        return;
    }
    let moved = f.ok(&request);
    assert_eq!(moved["applied"], MESSAGES, "{moved}");
    assert_eq!(f.counts("x").await, counts(0, 4, 0, 4, 0, 0));
    assert_eq!(f.indexed("in:archive"), MESSAGES as u64);
    let undone = f.ok(&["undo", &change_id(&moved)]);
    assert_eq!(undone["applied"], MESSAGES, "{undone}");
    assert_eq!(f.counts("x").await, counts(4, 0, 0, 4, 0, 0));
    assert_eq!(f.indexed("in:inbox is:unread"), MESSAGES as u64);
}

/// A deletion is only staged until a person runs it; run, it goes to the trash, and its
/// undo brings the messages back as they were.
async fn staged_deletion_and_undo(mut f: Fixture) {
    let request = ["stage-delete", "from:alice", "subject:Message"];
    if f.refuses.moves {
        // Both modes: trash mode moves, permanent mode expunges.
        f.refused(&request);
        f.refused(&[&request[..], &["--permanent"]].concat());
        assert_eq!(f.counts("x").await, counts(4, 0, 0, 4, 0, 0));
        return;
    }
    let staged = f.ok(&request);
    assert_eq!(staged["manifest"]["summary"]["count"], MESSAGES, "{staged}");
    assert_eq!(f.writes_since(), 0, "staging wrote to the server");
    assert_eq!(f.counts("x").await, counts(4, 0, 0, 4, 0, 0));
    let manifest = staged["manifest"]["id"].as_i64().unwrap().to_string();
    let run = f.ok(&["delete-staged", &manifest, "--yes"]);
    assert_eq!(run["counts"]["done"], MESSAGES, "{run}");
    assert_eq!(f.counts("x").await, counts(0, 0, 4, 4, 0, 0));
    assert_eq!(f.indexed("in:trash"), MESSAGES as u64);
    let undone = f.ok(&["undo", &change_id(&run)]);
    assert_eq!(undone["applied"], MESSAGES, "{undone}");
    assert_eq!(f.counts("x").await, counts(4, 0, 0, 4, 0, 0));
}

enum Kind {
    Imap,
    Imap4d,
    Jmap,
    Gmail,
    Graph,
    Mail,
}

tokio::task_local! {
    /// The engine of the scenario this task runs.
    static ENGINE: Engine;
}

/// A fresh home whose index is on the scenario's engine; `None` where PostgreSQL is not
/// installed outside CI.
fn home() -> Option<tempfile::TempDir> {
    common::home_on(ENGINE.try_with(|e| *e).unwrap_or(Engine::Sqlite))
}

/// A fresh fixture of that provider (`user` names the IMAP user); `None` where the test
/// server is not installed outside CI.
async fn setup(kind: Kind, user: &str) -> Option<Fixture> {
    match kind {
        Kind::Imap => Fixture::imap(user).await,
        Kind::Imap4d => Fixture::imap4d(user).await,
        Kind::Jmap => Fixture::jmap(user).await,
        Kind::Gmail => Fixture::gmail().await,
        Kind::Graph => Fixture::graph().await,
        Kind::Mail => Fixture::mail().await,
    }
}

/// `provider: Kind;` gives one test per scenario for that provider.
macro_rules! conformance {
    ($($provider:ident: $kind:expr;)*) => {$(
        mod $provider {
            use super::*;
            conformance!(@engine $kind, sqlite, Engine::Sqlite, "conf-");
            conformance!(@engine $kind, postgres, Engine::Postgres, "conf-pg-");
        }
    )*};
    (@engine $kind:expr, $engine:ident, $which:expr, $prefix:literal) => {
        mod $engine {
            use super::*;
            conformance!(@each $kind, $which, $prefix, patch_semantics, repeat_writes_nothing,
                changed_elsewhere_is_stale, lost_answer_is_not_resent, move_and_undo,
                staged_deletion_and_undo);
        }
    };
    (@each $kind:expr, $which:expr, $prefix:literal, $($scenario:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $scenario() {
            let user = concat!($prefix, stringify!($scenario));
            ENGINE
                .scope($which, async {
                    let Some(fixture) = setup($kind, user).await else {
                        return;
                    };
                    super::super::$scenario(fixture).await;
                })
                .await;
        }
    )*};
}

conformance! {
    imap: Kind::Imap;
    imap4d: Kind::Imap4d;
    jmap: Kind::Jmap;
    gmail: Kind::Gmail;
    graph: Kind::Graph;
    applescript: Kind::Mail;
}
