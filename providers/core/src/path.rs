//! Mailbox paths for providers whose folder names may hold the path separator (Graph folders,
//! Mail.app mailboxes, JMAP mailboxes): a folder `Receipts` under `Inbox` is `Inbox/Receipts`,
//! and a top-level folder whose own name is `Inbox/Receipts` is `Inbox\/Receipts`.
//!
//! Architecture Invariant: the path of a folder is unique among an account's folders and names
//! exactly one of them. Inside a name, `\` is written `\\` and `/` is written `\/`, so the
//! escaped names never hold a bare `/` and joining them with `/` can be split back into the
//! same names: two different folders never share a path, whatever their names. IMAP is not
//! among these providers: its server spells hierarchy itself and a name never holds the
//! server's delimiter.

/// What joins a parent's path and a child's escaped name.
pub const SEPARATOR: char = '/';
const ESCAPE: char = '\\';

/// One folder name as a path segment: `\` and `/` escaped, anything else as it is.
pub fn escape_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c == ESCAPE || c == SEPARATOR {
            out.push(ESCAPE);
        }
        out.push(c);
    }
    out
}

/// The path of folder `name` under the folder at `parent` (`None` at the top).
pub fn child_path(parent: Option<&str>, name: &str) -> String {
    match parent {
        Some(p) => format!("{p}{SEPARATOR}{}", escape_segment(name)),
        None => escape_segment(name),
    }
}

/// The folder names along `path`, unescaped: the inverse of joining `escape_segment`s. A
/// trailing lone `\` is kept as it is (no path this module makes ends so).
pub fn split_path(path: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        let current = parts.last_mut().expect("parts is never empty");
        match c {
            ESCAPE => current.push(chars.next().unwrap_or(ESCAPE)),
            SEPARATOR => parts.push(String::new()),
            _ => current.push(c),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_separator_inside_a_name_never_makes_a_child_path() {
        let top = child_path(None, "Inbox/Receipts");
        let child = child_path(Some("Inbox"), "Receipts");
        assert_eq!(top, r"Inbox\/Receipts");
        assert_eq!(child, "Inbox/Receipts");
        assert_ne!(top, child);
        assert_eq!(split_path(&top), vec!["Inbox/Receipts"]);
        assert_eq!(split_path(&child), vec!["Inbox", "Receipts"]);
    }

    #[test]
    fn paths_split_back_into_their_names() {
        let cases: &[&[&str]] = &[
            &["a"],
            &["a", "b"],
            &[r"a\", "b"],
            &[r"a\/b"],
            &["/", "//", ""],
            &[r"\\", "x/y\\z"],
        ];
        for names in cases {
            let mut path: Option<String> = None;
            for n in *names {
                path = Some(child_path(path.as_deref(), n));
            }
            let path = path.unwrap();
            assert_eq!(split_path(&path), *names, "{path}");
        }
        // Different name lists never give one path.
        assert_ne!(
            child_path(Some(&child_path(None, r"a\")), "b"),
            child_path(None, r"a\/b")
        );
    }
}
