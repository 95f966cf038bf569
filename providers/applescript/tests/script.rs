//! Hostile names in generated scripts: quotes, backslashes, line breaks, `&`, `¬`, non-ASCII.
//! Read with an AppleScript tokenizer (`mailbroker_testkit::applescript`), a script made with
//! a hostile name has exactly the code of the same script made with a plain one, and the
//! hostile name exactly where the plain one was, inside one string literal: no name can end
//! a literal early and become code.

use mailbroker_applescript::script::{self, Change, Target};
use mailbroker_core::path::escape_segment;
use mailbroker_testkit::applescript::{Token, params, tokenize};
use proptest::prelude::*;

const PLAIN: &str = "PLAIN";

/// Every kind of script, with `name` in every place a name or id goes (as a mailbox, the
/// one name along its path: a slash inside it is escaped in our path, not a level).
fn scripts(name: &str) -> Vec<String> {
    let mailbox = escape_segment(name);
    let targets = [
        Target {
            mail_id: Some(name.to_string()),
            message_id: Some(name.to_string()),
        },
        Target {
            mail_id: None,
            message_id: Some(name.to_string()),
        },
    ];
    let change = Change {
        read: Some(true),
        flagged: Some(false),
        move_to: Some(mailbox.clone()),
    };
    let draft = script::DraftScript {
        drafts: &mailbox,
        original: Some((&mailbox, targets[0].clone())),
        reply_all: true,
        to: vec![(name, name)],
        cc: vec![(name, name)],
        subject: name,
        body: name,
        sender: name,
    };
    vec![
        script::mailboxes(name, 60),
        script::messages(name, &mailbox, 1, 500, 60),
        script::apply(name, &mailbox, &targets, &change, 60),
        script::delete(name, &mailbox, &targets, 60),
        script::sources(name, &mailbox, &targets, 60),
        script::draft(name, &draft, 60),
        script::remove_draft(name, &mailbox, &targets[0], 60),
    ]
}

fn split(tokens: Vec<Token>) -> (Vec<String>, Vec<String>) {
    let mut code = Vec::new();
    let mut strings = Vec::new();
    for t in tokens {
        match t {
            Token::Code(c) => code.push(c),
            Token::Str(s) => strings.push(s),
        }
    }
    (code, strings)
}

fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "\"",
        "\\",
        "\n",
        "\r",
        "\r\n",
        "\t",
        "&",
        "¬",
        "é",
        "日本",
        "--",
        "(*",
        "*)",
        "#",
        "\" & (do shell script \"touch /tmp/p\") & \"",
        "«event ascrcmnt»",
        " ",
        "x",
        "end tell",
        "\u{2028}",
        "{",
        "}",
        ":",
        ",",
    ]);
    prop::collection::vec(pieces, 1..12).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn a_name_stays_inside_its_literal(name in hostile()) {
        for (plain, tricky) in scripts(PLAIN).into_iter().zip(scripts(&name)) {
            let (plain_code, plain_strings) = split(tokenize(&plain).unwrap());
            let (code, strings) = split(tokenize(&tricky).unwrap());
            prop_assert_eq!(&code, &plain_code, "the name changed the script's code");
            prop_assert_eq!(strings.len(), plain_strings.len());
            for (s, p) in strings.iter().zip(&plain_strings) {
                let expected = if p == PLAIN { name.clone() } else { p.clone() };
                prop_assert_eq!(s, &expected);
            }
            // The params record reads back with the name in every place it was put.
            let read = params(&tricky).unwrap();
            prop_assert_eq!(read["acctName"].as_str(), Some(name.as_str()));
        }
    }
}

#[test]
fn the_injection_from_the_docs_stays_a_string() {
    let evil = "x\" & (do shell script \"touch /tmp/p\") & \"";
    let s = script::apply(
        "Work",
        &escape_segment(evil),
        &[],
        &Change {
            move_to: Some(escape_segment(evil)),
            ..Change::default()
        },
        60,
    );
    let (code, strings) = split(tokenize(&s).unwrap());
    assert!(strings.iter().filter(|s| *s == evil).count() == 2);
    assert!(!code.iter().any(|c| c.contains("do shell script")));
}

/// A mailbox is named by the list of names along its path, so a slash inside one name stays
/// in that name: `Clients/Acme` is two levels, `Clients\/Acme` one mailbox so named.
#[test]
fn a_path_becomes_the_list_of_its_names() {
    let nested = script::messages("Work", "Clients/Acme", 1, 50, 60);
    let named = script::messages("Work", r"Clients\/Acme", 1, 50, 60);
    assert_eq!(
        params(&nested).unwrap()["boxPath"],
        serde_json::json!(["Clients", "Acme"])
    );
    assert_eq!(
        params(&named).unwrap()["boxPath"],
        serde_json::json!(["Clients/Acme"])
    );
}
