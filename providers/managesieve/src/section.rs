//! mailbroker's part of a Sieve script that is the person's own: two delimited sections,
//! its `require` line at the very top (Sieve takes `require` only before any other command,
//! and takes several) and its rules at the end. Every byte outside them is the person's and
//! is kept as it was; taking mailbroker's part out gives the person's script back exactly.

/// The lines that open and close each part; a person who reads the script sees whose it is.
const TOP_BEGIN: &str =
    "# BEGIN mailbroker requires (written by mailbroker; change it with `mailbroker rule`)\r\n";
const TOP_END: &str = "# END mailbroker requires\r\n";
/// With the line break before it, so that a script whose last line has none stays as it was.
const RULES_BEGIN: &str =
    "\r\n# BEGIN mailbroker rules (written by mailbroker; change them with `mailbroker rule`)\r\n";
const RULES_END: &str = "# END mailbroker rules\r\n";

/// mailbroker's part: what it requires, and its rules, as Sieve text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub requires: Vec<String>,
    pub rules: String,
}

impl Part {
    fn top(&self) -> String {
        let quoted: Vec<String> = self.requires.iter().map(|r| quote(r)).collect();
        format!("{TOP_BEGIN}require [{}];\r\n{TOP_END}", quoted.join(", "))
    }

    fn bottom(&self) -> String {
        let mut rules = self.rules.replace("\r\n", "\n").replace('\n', "\r\n");
        if !rules.is_empty() && !rules.ends_with("\r\n") {
            rules.push_str("\r\n");
        }
        format!("{RULES_BEGIN}{rules}{RULES_END}")
    }
}

/// A Sieve quoted string: `"` and `\` escaped. A control character cannot be written in one
/// safely and is refused by the caller before it gets here (`quotable`).
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Whether `text` can stand in a quoted string or a comment as the person typed it: no
/// control character (a line break would end a comment and start a command).
pub fn quotable(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// `script` (the person's, maybe with an older part of mailbroker's) with `part` as
/// mailbroker's part: the person's bytes between the two sections stay exactly as they are.
pub fn splice(script: &str, part: &Part) -> String {
    let own = persons(script);
    format!("{}{own}{}", part.top(), part.bottom())
}

/// The person's own script: `script` without mailbroker's part, as it was before it was
/// spliced in, byte for byte.
pub fn persons(script: &str) -> String {
    cut(&cut(script, TOP_BEGIN, TOP_END), RULES_BEGIN, RULES_END)
}

/// The names of mailbroker's rules in `script` (each block's `# rule:` line).
pub fn rule_names(script: &str) -> Vec<String> {
    let Some(from) = script.find(RULES_BEGIN) else {
        return Vec::new();
    };
    let rules = &script[from..];
    let rules = &rules[..rules.find(RULES_END).unwrap_or(rules.len())];
    rules
        .lines()
        .filter_map(|l| l.strip_prefix("# rule: "))
        .map(|name| name.trim_end_matches('\r').to_string())
        .collect()
}

/// Whether the person's part of `script` sends mail elsewhere (Sieve's `redirect`), read
/// line by line with comments set aside: a hint for the person, never a reason to write.
pub fn forwards(script: &str) -> bool {
    persons(script).lines().any(|line| {
        let code = line.split('#').next().unwrap_or("");
        code.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|word| word.eq_ignore_ascii_case("redirect"))
    })
}

/// Whether `script` holds a part of mailbroker's.
pub fn has_part(script: &str) -> bool {
    script.contains(TOP_BEGIN) || script.contains(RULES_BEGIN)
}

/// `script` without the first `begin` … `end` section (inclusive).
fn cut(script: &str, begin: &str, end: &str) -> String {
    let Some(from) = script.find(begin) else {
        return script.to_string();
    };
    match script[from..].find(end) {
        Some(to) => format!("{}{}", &script[..from], &script[from + to + end.len()..]),
        None => script.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(rules: &str) -> Part {
        Part {
            requires: vec!["fileinto".into(), "imap4flags".into()],
            rules: rules.into(),
        }
    }

    #[test]
    fn the_persons_bytes_are_kept_and_given_back_exactly() {
        for own in [
            "",
            "require \"fileinto\";\nif header :contains \"subject\" \"x\" { fileinto \"X\"; }\n",
            "# no final line break\r\nkeep;",
            "require [\"vacation\"];\r\n\r\nvacation \"away\";\r\n",
        ] {
            let once = splice(own, &part("if true { addflag \"a\"; }"));
            assert!(once.starts_with(TOP_BEGIN), "{once}");
            assert!(once.contains(own), "{once}");
            assert_eq!(persons(&once), own, "{once:?}");
            // A new part replaces the old one; the person's bytes stay.
            let twice = splice(&once, &part("if true { addflag \"b\"; }"));
            assert_eq!(persons(&twice), own);
            assert!(
                twice.contains("\"b\"") && !twice.contains("\"a\";"),
                "{twice}"
            );
            assert!(!persons(&twice).contains("mailbroker"));
        }
    }

    #[test]
    fn quoted_strings_escape_what_would_end_them() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("x; stop;"), "\"x; stop;\"");
        assert!(quotable("Newsletters: weekly"));
        assert!(!quotable("x\nstop;"));
        assert!(!quotable("x\r"));
    }
}
