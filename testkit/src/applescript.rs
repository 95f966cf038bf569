//! Reading the AppleScript mailbroker generates, as a test (and the fake `osascript`) needs:
//! a tokenizer that splits a script into string literals and the code between them, by
//! AppleScript's own rules, and a reader for the one `set params to {…}` record every script
//! carries.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

/// A Mail.app kept as JSON for the fake `osascript` (testkit's `fake-osascript` binary), and
/// an executable that runs the fake on it: point `MAILBROKER_OSASCRIPT` at `program`.
pub struct FakeMail {
    pub program: PathBuf,
    pub state: PathBuf,
}

impl FakeMail {
    /// A running Mail.app with these accounts (`{NAME: {"mailboxes": {PATH: [message…]},
    /// "junk": PATH, "trash": PATH}}`), kept in `dir`.
    pub fn new(dir: &Path, accounts: Value) -> FakeMail {
        let state = dir.join("mail-app.json");
        let program = dir.join("osascript");
        let fake = fake_osascript();
        let wrapper = format!(
            "#!/bin/sh\necho \"$#\" >> '{}'\nFAKE_MAIL_STATE='{}' exec '{}' \"$@\"\n",
            dir.join("argc").display(),
            state.display(),
            fake.display()
        );
        std::fs::write(&program, wrapper).expect("write the fake osascript");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
            .expect("make the fake osascript executable");
        let mail = FakeMail { program, state };
        mail.write(
            &json!({ "running": true, "next_id": 1000, "accounts": accounts,
            "faults": {}, "log": [] }),
        );
        mail
    }

    pub fn read(&self) -> Value {
        let text = std::fs::read_to_string(&self.state).expect("read the fake Mail.app");
        serde_json::from_str(&text).expect("the fake Mail.app is JSON")
    }

    pub fn write(&self, state: &Value) {
        std::fs::write(&self.state, state.to_string()).expect("write the fake Mail.app");
    }

    /// Changes the fake Mail.app (a fault, a message) in place.
    pub fn update(&self, change: impl FnOnce(&mut Value)) {
        let mut state = self.read();
        change(&mut state);
        self.write(&state);
    }

    /// The scripts it ran, by kind, in order.
    pub fn kinds(&self) -> Vec<String> {
        self.read()["log"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["kind"].as_str().map(str::to_string))
            .collect()
    }

    /// How many arguments each run of `osascript` had (a script never goes on the command
    /// line).
    pub fn argument_counts(&self) -> Vec<String> {
        let argc = self.state.with_file_name("argc");
        std::fs::read_to_string(argc)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A message of the fake Mail.app.
pub fn message(id: i64, message_id: &str, subject: &str, read: bool) -> Value {
    json!({ "id": id, "message_id": message_id, "subject": subject,
        "sender": "news@shop.example", "date": 1_700_000_000 + id, "read": read, "flagged": false })
}

/// The fake `osascript`, built beside the running test (`cargo test --workspace` builds it).
pub fn fake_osascript() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary under target/PROFILE/deps");
    let bin = profile.join("fake-osascript");
    assert!(
        bin.is_file(),
        "{} is missing: build it with cargo build -p mailbroker-testkit --bins (cargo test --workspace does)",
        bin.display()
    );
    bin
}

/// A piece of a script: a string literal's value, or the code (and comments) around them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Str(String),
    Code(String),
}

/// Splits `script` into literals and code. Inside a literal, a backslash escapes the next
/// character (`\n`, `\r`, `\t`, `\"`, `\\`); an unescaped quote ends it. Comments (`--` and
/// `#` to the end of the line, `(* … *)` nested) are code: a quote in one starts nothing.
pub fn tokenize(script: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = script.chars().collect();
    let mut out = Vec::new();
    let mut code = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '"' {
            if !code.is_empty() {
                out.push(Token::Code(std::mem::take(&mut code)));
            }
            let (value, end) = literal(&chars, i + 1)?;
            out.push(Token::Str(value));
            i = end;
        } else if (c == '-' && next == Some('-')) || c == '#' {
            while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                code.push(chars[i]);
                i += 1;
            }
        } else if c == '(' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                let pair = (chars[i], chars.get(i + 1).copied());
                if pair == ('(', Some('*')) || pair == ('*', Some(')')) {
                    depth += if pair.0 == '(' { 1 } else { -1 };
                    code.push(pair.0);
                    code.push(if pair.0 == '(' { '*' } else { ')' });
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    code.push(chars[i]);
                    i += 1;
                }
            }
            if depth != 0 {
                bail!("an unterminated (* comment");
            }
        } else {
            code.push(c);
            i += 1;
        }
    }
    if !code.is_empty() {
        out.push(Token::Code(code));
    }
    Ok(out)
}

/// A literal's value from just after its opening quote: (value, index after its close).
fn literal(chars: &[char], mut i: usize) -> Result<(String, usize)> {
    let mut value = String::new();
    loop {
        match chars.get(i) {
            None => bail!("an unterminated string literal"),
            Some('"') => return Ok((value, i + 1)),
            Some('\\') => {
                value.push(match chars.get(i + 1) {
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('"') => '"',
                    Some('\\') => '\\',
                    other => bail!("an escape AppleScript does not know: \\{other:?}"),
                });
                i += 2;
            }
            Some(c) => {
                value.push(*c);
                i += 1;
            }
        }
    }
}

/// The kind a script names on its first line (`-- mailbroker apply` → `apply`).
pub fn kind(script: &str) -> Option<&str> {
    script.lines().next()?.strip_prefix("-- mailbroker ")
}

/// The `set params to {…}` record, as JSON: records become objects, lists arrays, literals
/// strings, numbers numbers, `true`/`false` booleans.
pub fn params(script: &str) -> Result<Value> {
    let tokens = tokenize(script)?;
    let mut parts: Vec<Part> = Vec::new();
    let mut started = false;
    for token in tokens {
        match token {
            Token::Code(code) if !started => {
                if let Some(at) = code.find("set params to ") {
                    started = true;
                    lex(&code[at + "set params to ".len()..], &mut parts);
                }
            }
            Token::Code(code) => {
                // The record ends at the first line break outside a literal.
                let line = code.split(['\n', '\r']).next().unwrap_or_default();
                lex(line, &mut parts);
                if line.len() < code.len() {
                    break;
                }
            }
            Token::Str(s) if started => parts.push(Part::Str(s)),
            Token::Str(_) => {}
        }
    }
    let mut at = 0;
    let value = value(&parts, &mut at)?;
    if at != parts.len() {
        bail!("more after the params record: {:?}", &parts[at..]);
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Open,
    Close,
    Colon,
    Comma,
    Word(String),
    Str(String),
}

fn lex(code: &str, parts: &mut Vec<Part>) {
    let mut word = String::new();
    let flush = |word: &mut String, parts: &mut Vec<Part>| {
        if !word.is_empty() {
            parts.push(Part::Word(std::mem::take(word)));
        }
    };
    for c in code.chars() {
        let part = match c {
            '{' => Some(Part::Open),
            '}' => Some(Part::Close),
            ':' => Some(Part::Colon),
            ',' => Some(Part::Comma),
            c if c.is_whitespace() => None,
            c => {
                word.push(c);
                continue;
            }
        };
        flush(&mut word, parts);
        parts.extend(part);
    }
    flush(&mut word, parts);
}

fn value(parts: &[Part], at: &mut usize) -> Result<Value> {
    let Some(part) = parts.get(*at) else {
        bail!("the params record ends early");
    };
    *at += 1;
    match part {
        Part::Str(s) => Ok(Value::String(s.clone())),
        Part::Word(w) if w == "true" || w == "false" => Ok(Value::Bool(w == "true")),
        Part::Word(w) => Ok(Value::Number(w.parse::<i64>()?.into())),
        Part::Open => {
            let is_record = matches!(
                (parts.get(*at), parts.get(*at + 1)),
                (Some(Part::Word(_)), Some(Part::Colon))
            );
            let mut list = Vec::new();
            let mut record = Map::new();
            loop {
                if parts.get(*at) == Some(&Part::Close) {
                    *at += 1;
                    break;
                }
                if is_record {
                    let Some(Part::Word(label)) = parts.get(*at) else {
                        bail!("a record label expected at {:?}", parts.get(*at));
                    };
                    if parts.get(*at + 1) != Some(&Part::Colon) {
                        bail!("a colon expected after {label}");
                    }
                    *at += 2;
                    record.insert(label.clone(), value(parts, at)?);
                } else {
                    list.push(value(parts, at)?);
                }
                match parts.get(*at) {
                    Some(Part::Comma) => *at += 1,
                    Some(Part::Close) => {}
                    other => bail!("a comma or a brace expected, not {other:?}"),
                }
            }
            Ok(match is_record {
                true => Value::Object(record),
                false => Value::Array(list),
            })
        }
        other => bail!("a value expected, not {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_comments_and_the_params_record() {
        let script = "-- mailbroker apply\nset params to {a:\"x\\\"y\", n:3, b:true, l:{{k:\"1\"}, {k:\"2\"}}, e:{}}\n(* \"no\" (* nested *) *) return \"ok\" -- \"no\"\n";
        let strings: Vec<String> = tokenize(script)
            .unwrap()
            .into_iter()
            .filter_map(|t| match t {
                Token::Str(s) => Some(s),
                Token::Code(_) => None,
            })
            .collect();
        assert_eq!(strings, ["x\"y", "1", "2", "ok"]);
        assert_eq!(kind(script), Some("apply"));
        assert_eq!(
            params(script).unwrap(),
            serde_json::json!({"a": "x\"y", "n": 3, "b": true,
                "l": [{"k": "1"}, {"k": "2"}], "e": []})
        );
        assert!(tokenize("\"open").is_err());
    }
}
