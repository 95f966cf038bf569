use super::*;

fn t(term: Term) -> Expr {
    Expr::Term(term)
}

fn not(e: Expr) -> Expr {
    Expr::Not(Box::new(e))
}

fn from(s: &str) -> Expr {
    t(Term::From(s.into()))
}

fn text(s: &str) -> Expr {
    t(Term::Text(s.into()))
}

fn root(q: &str) -> Expr {
    parse(q, 0).unwrap_or_else(|e| panic!("{q}: {e}")).root
}

fn refused(q: &str) -> Error {
    match parse(q, 0) {
        Ok(parsed) => panic!("{q} parsed as {parsed:?}"),
        Err(e) => {
            assert_eq!(e.error_type(), "validation_error", "{q}: {e}");
            e
        }
    }
}

#[test]
fn parses_fields_flags_text_and_negation() {
    assert_eq!(
        root(r#"from:alice subject:"big news" is:unread -tag:done invoice"#),
        Expr::And(vec![
            from("alice"),
            t(Term::Subject("big news".into())),
            t(Term::Read(false)),
            not(t(Term::Tag("done".into()))),
            text("invoice"),
        ])
    );
}

#[test]
fn not_binds_tightest_then_and_then_or() {
    assert_eq!(
        root("a b OR c"),
        Expr::Or(vec![Expr::And(vec![text("a"), text("b")]), text("c")])
    );
    assert_eq!(
        root("-a OR b c"),
        Expr::Or(vec![not(text("a")), Expr::And(vec![text("b"), text("c")])])
    );
    assert_eq!(
        root("a | b | c"),
        Expr::Or(vec![text("a"), text("b"), text("c")])
    );
    assert_eq!(root("a AND b"), Expr::And(vec![text("a"), text("b")]));
    // Lower-case `or` is a word, as in Gmail.
    assert_eq!(
        root("a or b"),
        Expr::And(vec![text("a"), text("or"), text("b")])
    );
}

#[test]
fn groups_braces_and_negated_groups() {
    assert_eq!(
        root("(from:a OR from:b) is:unread"),
        Expr::And(vec![
            Expr::Or(vec![from("a"), from("b")]),
            t(Term::Read(false))
        ])
    );
    assert_eq!(
        root("-(from:a OR tag:x) y"),
        Expr::And(vec![
            not(Expr::Or(vec![from("a"), t(Term::Tag("x".into()))])),
            text("y")
        ])
    );
    assert_eq!(
        root("{from:a from:b} -{c d}"),
        Expr::And(vec![
            Expr::Or(vec![from("a"), from("b")]),
            not(Expr::Or(vec![text("c"), text("d")]))
        ])
    );
    // Brackets end words; inside quotes they are text.
    assert_eq!(root("(a)b"), Expr::And(vec![text("a"), text("b")]));
    assert_eq!(
        root(r#"subject:"(re) x""#),
        t(Term::Subject("(re) x".into()))
    );
    assert_eq!(root("((a))"), text("a"));
}

#[test]
fn bracket_and_operator_mistakes_point_at_their_place() {
    for (q, pos) in [
        ("a OR", "position 3"),
        ("OR a", "position 1"),
        ("(a", "position 1"),
        ("a )", "position 3"),
        ("a (b}", "position 5"),
        ("()", "position 1"),
        ("a AND", "position 3"),
        ("from:a bogus:x", "position 8"),
    ] {
        let e = refused(q);
        assert!(e.message().contains(pos), "{q}: {}", e.message());
    }
    let e = parse("subject:(a b)", 0).unwrap_err();
    assert_eq!(e.error_type(), "unsupported");
    assert!(
        e.next_step().unwrap().contains("(subject:a subject:b)"),
        "{e}"
    );
    assert!(refused("a \u{0}b").message().contains("position 3"));
    let e = refused("subject:\"open");
    assert!(e.message().contains("unclosed quote"), "{}", e.message());
    let deep = format!(
        "{}a{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert!(refused(&deep).message().contains("nest"));
    let fine = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert_eq!(root(&fine), text("a"));
}

#[test]
fn dates_sizes_and_ages() {
    assert_eq!(
        parse("after:2024-01-02 larger:2K newer_than:1w", 1_000_000)
            .unwrap()
            .root,
        Expr::And(vec![
            t(Term::After(1_704_153_600)),
            t(Term::Larger(2048)),
            t(Term::After(1_000_000 - 7 * 86_400))
        ])
    );
}

#[test]
fn numbers_too_large_and_odd_units_are_refused() {
    for q in [
        "larger:18446744073709551615",
        "larger:8589934592G",
        "smaller:9223372036854775808",
        "older_than:9223372036854775807d",
        "newer_than:106751991167300y",
        "newer_than:1é",
        "larger:5é",
        "older_than:-5d",
        "newer_than:+1w",
        "larger:-1",
        "smaller:+2K",
    ] {
        let e = parse(q, 1_000_000).unwrap_err();
        assert_eq!(e.error_type(), "validation_error", "{q}");
    }
    assert_eq!(
        root("larger:9223372036854775807"),
        t(Term::Larger(i64::MAX as u64))
    );
}

#[test]
fn impossible_dates_are_refused() {
    for q in [
        "before:2026-02-31",
        "after:2025-02-29",
        "before:2026-04-31",
        "before:0-01-01",
    ] {
        refused(q);
    }
    root("before:2024-02-29");
}

#[test]
fn dashes_negate_by_parity_without_recursion() {
    let q = format!("{}from:a", "-".repeat(100_001));
    assert_eq!(root(&q), not(from("a")));
    assert_eq!(root("--x"), text("x"));
    let q = format!("{}(a OR b)", "-".repeat(100_000));
    assert_eq!(root(&q), Expr::Or(vec![text("a"), text("b")]));
    // Dashes alone are a word, and one without a letter or digit, which is refused.
    refused("a - b");
}

#[test]
fn a_selection_needs_words_and_few_enough_terms() {
    for q in ["", "   ", "\t\n"] {
        let e = parse_selection(q, 0).unwrap_err();
        assert_eq!(e.error_type(), "validation_error", "{q:?}");
        assert!(e.next_step().unwrap().contains("in:anywhere"));
    }
    assert_eq!(
        parse_selection("in:anywhere", 0).unwrap().root,
        t(Term::Anywhere)
    );
    let many = vec!["x"; MAX_TERMS + 1].join(" OR ");
    refused(&many);
    root(&vec!["x"; MAX_TERMS].join(" "));
}

#[test]
fn a_query_restricted_to_an_account() {
    let q = parse("a OR b", 0).unwrap().in_account("work");
    assert_eq!(
        q.root,
        Expr::And(vec![
            Expr::Or(vec![text("a"), text("b")]),
            t(Term::Account("work".into()))
        ])
    );
    assert!(parse(" ", 0).unwrap().is_empty());
    assert!(!parse(" ", 0).unwrap().in_account("w").is_empty());
}

#[test]
fn lists_by_id_or_any_and_threads_by_id() {
    assert_eq!(
        root("list:news.example.org"),
        t(Term::List(Some("news.example.org".into())))
    );
    assert_eq!(root("list:*"), t(Term::List(None)));
    assert_eq!(root("is:list"), t(Term::List(None)));
    assert_eq!(root("-list:news"), not(t(Term::List(Some("news".into())))));
    refused("list:");
    assert_eq!(
        root("thread:0A1B2c3d4e5f from:dana"),
        Expr::And(vec![t(Term::Thread("0A1B2c3d4e5f".into())), from("dana")])
    );
    refused("thread:");
}

/// `-""` (and `-" "`, `-"-"`, `-"."`, `-"@"`, a zero-width space, `-("" OR "")`,
/// `x OR -""`) selected every message: a phrase with no word in it matches none, so its
/// negation matched all. A phrase or word with no letter or digit is refused.
#[test]
fn a_phrase_without_a_word_is_refused() {
    for q in [
        "\"\"",
        "-\"\"",
        "-\" \"",
        "-\"-\"",
        "-\".\"",
        "-\"@\"",
        "-\"\u{200B}\"",
        "-(\"\" OR \"\")",
        "x OR -\"\"",
        "-.",
        "in:inbox -@@",
    ] {
        let e = refused(q);
        assert!(e.to_string().contains("no letter or digit"), "{q}: {e}");
    }
    assert_eq!(root("\"don't\""), text("don't"));
    assert_eq!(root("-\"x.y\""), not(text("x.y")));
    assert_eq!(root("from:@"), t(Term::From("@".into())));
}
