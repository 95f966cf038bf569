//! ARCHITECTURE.md names real things: every repository path it names in backquotes exists,
//! and every `path::item` it names (an entry point, a type) is defined in that file.

use std::path::Path;

/// Where repository paths begin; other backquoted words are code or prose.
const ROOTS: [&str; 11] = [
    "src/",
    "providers/",
    "tests/",
    "mocks/",
    "testkit/",
    "crates/",
    "bench/",
    "scripts/",
    "docs/",
    ".ci/",
    ".cargo/",
];

/// The backquoted spans of `text`.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_path_and_item_named_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut checked = 0;
    let mut missing = Vec::new();
    for span in spans(&map) {
        if !ROOTS.iter().any(|r| span.starts_with(r)) || span.contains(' ') {
            continue;
        }
        let (path, item) = match span.split_once("::") {
            Some((path, item)) => (path, Some(item)),
            None => (span.trim_end_matches('/'), None),
        };
        checked += 1;
        let file = root.join(path);
        if !file.exists() {
            missing.push(format!("{span}: no {path}"));
            continue;
        }
        // `Type::method` or `function`: the last name is defined in the file.
        if let Some(item) = item {
            let name = item.rsplit("::").next().unwrap_or(item);
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let defined = [
                "fn ", "struct ", "enum ", "trait ", "type ", "const ", "mod ",
            ]
            .iter()
            .any(|k| text.contains(&format!("{k}{name}")));
            if !defined {
                missing.push(format!("{span}: {path} defines no {name}"));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} paths read: the reader is broken"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        missing.join("\n")
    );
}
