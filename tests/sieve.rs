//! ManageSieve against Dovecot's Pigeonhole, and what its scripts do on delivery: the client
//! reads, checks and writes scripts; mailbroker's part of a person's script leaves every byte
//! of theirs as it was; a value carrying Sieve's syntax is quoted, so the server parses it as
//! a string and the delivered message is filed by it.

mod common;

use mailbroker_core::{Patch, Rule, ServerRule};
use mailbroker_managesieve::section::{self, Part};
use mailbroker_managesieve::sieve;
use mailbroker_managesieve::{Client, Script};
use mailbroker_testkit::{Dovecot, ImapClient, PASSWORD, dovecot_required};
use tokio::net::TcpStream;

/// The shared Dovecot's ManageSieve port; `None` (skipped) without Pigeonhole outside CI.
fn sieve(server: &Dovecot) -> Option<u16> {
    if server.sieve_port.is_none() {
        assert!(
            !dovecot_required(),
            "CI=true but Pigeonhole is missing: .ci/run must install dovecot-managesieved"
        );
        eprintln!("skipping: apt-get install dovecot-sieve dovecot-managesieved");
    }
    server.sieve_port
}

async fn signed_in(port: u16, user: &str) -> Client<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut client = Client::greet(tcp).await.expect("a greeting");
    client
        .authenticate(user, PASSWORD)
        .await
        .expect("signed in");
    client
}

#[tokio::test]
async fn a_persons_script_keeps_its_bytes_and_mailbrokers_rules_file_the_mail() {
    let Some(server) = common::server() else {
        return;
    };
    let Some(port) = sieve(server) else {
        return;
    };
    let user = "sieve-person";
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut client = Client::greet(tcp).await.unwrap();
    let caps = client.capabilities.clone();
    assert!(caps.implementation.contains("Pigeonhole"), "{caps:?}");
    assert!(
        caps.missing(&["fileinto", "imap4flags", "mailbox"])
            .is_empty(),
        "{caps:?}"
    );
    assert_eq!(
        caps.missing(&["fileinto", "no-such-extension"]),
        ["no-such-extension"]
    );
    let wrong = client
        .authenticate(user, "not the password")
        .await
        .unwrap_err();
    assert_eq!(wrong.error_type(), "auth_required");
    assert!(!wrong.message().contains("not the password"));
    client.authenticate(user, PASSWORD).await.unwrap();

    // The person's own script, active, with no line break at its end.
    let own = "require [\"fileinto\"];\r\n# mine\r\nif header :contains \"subject\" \"invoice\" { fileinto \"Invoices\"; }";
    client.check(own).await.unwrap();
    client.put("mine", own).await.unwrap();
    client.set_active("mine").await.unwrap();
    let listed = client.list().await.unwrap();
    assert!(
        listed.contains(&Script {
            name: "mine".into(),
            active: true
        }),
        "{listed:?}"
    );

    // A subject a stranger chose, with Sieve's own syntax in it: quoted, it is one string.
    let subject = "Weekly \"news\"; stop; \\ digest";
    assert!(section::quotable(subject));
    let rules = format!(
        "if header :contains \"subject\" {} {{ addflag \"$mb-news\"; fileinto :create \"News\"; }}",
        section::quote(subject)
    );
    let part = Part {
        requires: vec!["fileinto".into(), "imap4flags".into(), "mailbox".into()],
        rules,
    };
    let before = client.get("mine").await.unwrap();
    assert_eq!(before, own, "GETSCRIPT gives the bytes back");
    let spliced = section::splice(&before, &part);
    client.check(&spliced).await.expect("the server parses it");
    client.put("mine", &spliced).await.unwrap();
    let read_back = client.get("mine").await.unwrap();
    assert_eq!(read_back, spliced);
    assert_eq!(
        section::persons(&read_back),
        own,
        "the person's bytes, exactly"
    );

    // Unquoted, the same text would be Sieve: the server says where.
    let broken = format!("if header :contains \"subject\" \"{subject}\" {{ keep; }}\r\n");
    let refused = client.check(&broken).await.unwrap_err();
    assert_eq!(refused.error_type(), "validation_error");
    assert!(refused.message().contains("line"), "{}", refused.message());
    client.logout().await.unwrap();

    // Delivery runs the script: the stranger's subject is filed and tagged; another is not.
    let mail = |subject: &str| {
        format!(
            "From: news@example.test\r\nTo: {user}@example.test\r\nSubject: {subject}\r\n\
             Message-ID: <{}@example.test>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\r\nhi\r\n",
            subject.len()
        )
    };
    let mut imap = ImapClient::connect(server, user).await.unwrap();
    imap.create("Invoices").await.unwrap();
    server.deliver(user, mail(subject).as_bytes()).unwrap();
    server.deliver(user, mail("invoice 12").as_bytes()).unwrap();
    server.deliver(user, mail("hello").as_bytes()).unwrap();
    assert_eq!(imap.subjects("News").await.unwrap(), [subject]);
    assert_eq!(
        imap.subjects("Invoices").await.unwrap(),
        ["invoice 12"],
        "the person's rule runs too"
    );
    let flags = imap.flags("News").await.unwrap();
    assert!(
        flags.values().all(|f| f.iter().any(|k| k == "$mb-news")),
        "{flags:?}"
    );
    assert_eq!(imap.subjects("INBOX").await.unwrap(), ["hello"]);

    // Taking mailbroker's part out gives the person's script back: the next delivery is
    // theirs alone.
    let mut client = signed_in(port, user).await;
    client
        .put("mine", &section::persons(&read_back))
        .await
        .unwrap();
    assert_eq!(client.get("mine").await.unwrap(), own);
    client.logout().await.unwrap();
    server.deliver(user, mail(subject).as_bytes()).unwrap();
    let inbox = imap.subjects("INBOX").await.unwrap();
    assert!(
        inbox.len() == 2 && inbox.contains(&subject.to_string()),
        "{inbox:?}"
    );
}

/// Rules written as queries, translated to Sieve and run on delivery: each matches what the
/// search would (a word from its start; NOT, AND, OR; the list's id; size), and does only
/// what it says (move, tag, read, flag).
#[tokio::test]
async fn rules_written_as_queries_file_arriving_mail_as_the_search_would_find_it() {
    let Some(server) = common::server() else {
        return;
    };
    let Some(port) = sieve(server) else {
        return;
    };
    let user = "sieve-rules";
    let rule = |name: &str, when: &str, then: Patch| Rule {
        name: name.into(),
        query: when.into(),
        when: mailbroker::rules::condition(when, 0).expect("a rule's condition"),
        then,
    };
    let news = rule(
        "news to News",
        "from:news@example.org -subject:urgent",
        Patch {
            add_tags: vec!["$news".into()],
            read: Some(true),
            ..Patch::default()
        },
    );
    let shop = rule(
        "shop or big: flag",
        "list:shop.example OR larger:20K",
        Patch {
            flagged: Some(true),
            ..Patch::default()
        },
    );
    let rules = [
        sieve::translate(&news, Some("News")).unwrap(),
        sieve::translate(&shop, None).unwrap(),
    ];
    let script = section::splice("", &sieve::part(&rules));
    let mut client = signed_in(port, user).await;
    client.check(&script).await.expect("valid Sieve");
    client.put("mailbroker", &script).await.unwrap();
    client.set_active("mailbroker").await.unwrap();
    client.logout().await.unwrap();

    let mail = |from: &str, subject: &str, extra: &str, body: &str| {
        format!(
            "From: {from}\r\nTo: {user}@example.test\r\nSubject: {subject}\r\n{extra}\
             Message-ID: <{}.{}@example.test>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\r\n{body}\r\n",
            subject.len(),
            body.len()
        )
    };
    for m in [
        mail("News <news@example.org>", "weekly", "", "hi"),
        mail("News <news@example.org>", "urgent: act", "", "hi"),
        mail("Nat <natnews@example.org>", "not news", "", "hi"),
        mail(
            "Shop <deals@shop.example>",
            "sale",
            "List-Id: Deals <shop.example>\r\n",
            "hi",
        ),
        mail("a@example.net", "big", "", &"x".repeat(25_000)),
    ] {
        server.deliver(user, m.as_bytes()).unwrap();
    }
    let mut imap = ImapClient::connect(server, user).await.unwrap();
    assert_eq!(imap.subjects("News").await.unwrap(), ["weekly"]);
    let filed = imap.flags("News").await.unwrap();
    let flags: Vec<&String> = filed.values().flatten().collect();
    assert!(
        flags.iter().any(|f| *f == "$news") && flags.iter().any(|f| *f == "\\Seen"),
        "{filed:?}"
    );
    let mut inbox = imap.subjects("INBOX").await.unwrap();
    inbox.sort();
    assert_eq!(inbox, ["big", "not news", "sale", "urgent: act"]);
    assert_eq!(imap.uid_search("INBOX", "FLAGGED").await.unwrap().len(), 2);
    for subject in ["sale", "big"] {
        let found = imap
            .uid_search("INBOX", &format!("FLAGGED SUBJECT {subject}"))
            .await;
        assert_eq!(found.unwrap().len(), 1, "{subject} flagged");
    }
}

/// The IMAP account's rules over ManageSieve, as the adapter keeps them: over STARTTLS with
/// the account's CA and login; mailbroker's rules put into the person's active script (their
/// forwarding rule reported, never touched), read back, and everything put back exactly by
/// the state returned; with no script of the person's, a script of mailbroker's own that the
/// undo removes again.
#[tokio::test]
async fn an_accounts_rules_are_installed_listed_and_put_back_exactly() {
    use mailbroker_imap::{ImapConfig, TlsMode, rules};
    let Some(server) = common::server() else {
        return;
    };
    let Some(port) = sieve(server) else {
        return;
    };
    let config = |user: &str| ImapConfig {
        host: "localhost".into(),
        port: server.imaps_port,
        tls: TlsMode::Implicit,
        username: user.into(),
        password: PASSWORD.into(),
        ca_pem: Some(std::fs::read(&server.ca.ca_pem).unwrap()),
        disabled_extensions: Vec::new(),
        allow_plaintext: false,
        sieve_port: Some(port),
    };
    let news = Rule {
        name: "news to Archive".into(),
        query: "from:news".into(),
        when: mailbroker::rules::condition("from:news", 0).unwrap(),
        then: Patch {
            move_to: Some("archive".into()),
            ..Patch::default()
        },
    };

    // A person with an active script that forwards.
    let user = "sieve-adapter";
    let own = "require [\"copy\"];\r\nredirect :copy \"me@elsewhere.example\";\r\n";
    let mut client = signed_in(port, user).await;
    client.put("mine", own).await.unwrap();
    client.set_active("mine").await.unwrap();
    client.logout().await.unwrap();
    let before = rules::put(&config(user), &[(news.clone(), Some("Archive".into()))])
        .await
        .expect("installed over STARTTLS");
    let listed = rules::read(&config(user)).await.unwrap();
    let ours: Vec<&ServerRule> = listed.iter().filter(|r| r.ours).collect();
    assert_eq!(ours.len(), 1, "{listed:?}");
    assert_eq!(
        (ours[0].name.as_str(), ours[0].enabled),
        ("news to Archive", true)
    );
    let theirs = listed
        .iter()
        .find(|r| !r.ours)
        .expect("the person's script");
    assert!(theirs.name == "mine" && theirs.forwards, "{listed:?}");
    rules::restore(&config(user), &before).await.unwrap();
    let mut client = signed_in(port, user).await;
    assert_eq!(client.get("mine").await.unwrap(), own, "byte for byte");
    let scripts = client.list().await.unwrap();
    assert_eq!(
        scripts,
        [Script {
            name: "mine".into(),
            active: true
        }]
    );
    client.logout().await.unwrap();

    // A person with no script: mailbroker's own, active; the undo leaves none.
    let user = "sieve-adapter-bare";
    let before = rules::put(&config(user), &[(news, Some("Archive".into()))])
        .await
        .unwrap();
    let mut client = signed_in(port, user).await;
    let scripts = client.list().await.unwrap();
    assert_eq!(
        scripts,
        [Script {
            name: "mailbroker".into(),
            active: true
        }]
    );
    client.logout().await.unwrap();
    rules::restore(&config(user), &before).await.unwrap();
    let mut client = signed_in(port, user).await;
    assert_eq!(client.list().await.unwrap(), []);
    client.logout().await.unwrap();

    // A wrong password is the person's to fix, and never shown.
    let mut wrong = config(user);
    wrong.password = "not-the-password".into();
    let e = rules::read(&wrong).await.unwrap_err();
    assert_eq!(e.error_type(), "auth_required");
    assert!(!e.message().contains("not-the-password"));
}

/// The same rules on Cyrus: over its timsieved, the IMAP account's login; delivered by LMTP,
/// the rule files and tags the mail; the undo leaves the user with no script of mailbroker's.
#[tokio::test]
async fn an_imap_accounts_rules_on_cyrus_run_on_lmtp_delivery() {
    use mailbroker_imap::{ImapConfig, TlsMode, rules};
    let Some(cyrus) = mailbroker_testkit::cyrus::shared() else {
        return;
    };
    let user = "sieve-cyrus";
    cyrus.add_user(user).await.unwrap();
    let config = ImapConfig {
        host: "127.0.0.1".into(),
        port: cyrus.imap_port,
        tls: TlsMode::None,
        username: user.into(),
        password: PASSWORD.into(),
        ca_pem: None,
        disabled_extensions: Vec::new(),
        allow_plaintext: false,
        sieve_port: Some(cyrus.sieve_port),
    };
    let news = Rule {
        name: "news to Archive".into(),
        query: "from:news -subject:urgent".into(),
        when: mailbroker::rules::condition("from:news -subject:urgent", 0).unwrap(),
        then: Patch {
            move_to: Some("archive".into()),
            add_tags: vec!["$news".into()],
            ..Patch::default()
        },
    };
    let before = rules::put(&config, &[(news, Some("Archive".into()))])
        .await
        .expect("installed over timsieved");
    let listed = rules::read(&config).await.unwrap();
    assert!(
        listed.iter().any(|r| r.ours && r.name == "news to Archive"),
        "{listed:?}"
    );
    let mail = |subject: &str| {
        format!(
            "From: News <news@example.org>\r\nTo: {user}@localhost\r\nSubject: {subject}\r\n\
             Message-ID: <{}.cyrus@example.test>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\r\nhi\r\n",
            subject.len()
        )
    };
    cyrus.deliver(user, mail("weekly").as_bytes()).unwrap();
    cyrus.deliver(user, mail("urgent: act").as_bytes()).unwrap();
    let mut imap = ImapClient::connect_port(cyrus.imap_port, user)
        .await
        .unwrap();
    assert_eq!(imap.subjects("Archive").await.unwrap(), ["weekly"]);
    let flags = imap.flags("Archive").await.unwrap();
    assert!(flags.values().flatten().any(|f| f == "$news"), "{flags:?}");
    assert_eq!(imap.subjects("INBOX").await.unwrap(), ["urgent: act"]);
    rules::restore(&config, &before).await.unwrap();
    assert!(rules::read(&config).await.unwrap().is_empty());
}
