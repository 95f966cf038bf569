//! What a ManageSieve server says: lines of atoms, quoted strings and literals, ended by a
//! response (`OK`, `NO` or `BYE`, with an optional code in brackets and an optional text).

use mailbroker_core::{Error, Result};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// The longest literal a server may send: a script is small (Dovecot's default limit is 1 MB).
const MAX_LITERAL: usize = 4 << 20;

/// One item of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Atom(String),
    /// A quoted string or a literal.
    Text(String),
    /// `( … )`: a response code with its arguments, as text.
    Code(String),
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub ok: bool,
    /// `BYE`: the server closes the connection.
    pub bye: bool,
    pub code: Option<String>,
    pub text: Option<String>,
}

impl Ended {
    /// The refusal as an error: the server's words, for `what` (a command's name).
    pub fn refused(&self, what: &str) -> Error {
        let said = self.text.as_deref().unwrap_or("no reason given");
        let code = self
            .code
            .as_deref()
            .map_or(String::new(), |c| format!(" ({c})"));
        Error::provider_unavailable(format!(
            "the Sieve server refused {what}{code}: {}",
            said.trim()
        ))
    }
}

fn broken(why: impl std::fmt::Display) -> Error {
    Error::provider_unavailable(format!(
        "the Sieve server's answer is not ManageSieve: {why}"
    ))
}

/// Reads lines until the response that ends a command; the lines before it, itemised.
pub async fn read<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<(Vec<Vec<Item>>, Ended)> {
    let mut lines = Vec::new();
    loop {
        let line = read_line(r).await?;
        let head = match line.first() {
            Some(Item::Atom(a)) => a.to_ascii_uppercase(),
            _ => String::new(),
        };
        if matches!(head.as_str(), "OK" | "NO" | "BYE") {
            let mut ended = Ended {
                ok: head == "OK",
                bye: head == "BYE",
                code: None,
                text: None,
            };
            for item in line.into_iter().skip(1) {
                match item {
                    Item::Code(c) => ended.code = Some(c),
                    Item::Text(t) => ended.text = Some(t),
                    Item::Atom(_) => {}
                }
            }
            return Ok((lines, ended));
        }
        lines.push(line);
    }
}

/// One line, its literals read in full.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    loop {
        let mut raw = Vec::new();
        let n = r.read_until(b'\n', &mut raw).await.map_err(broken)?;
        if n == 0 {
            return Err(Error::provider_unavailable(
                "the Sieve server closed the connection",
            ));
        }
        let text = String::from_utf8(raw).map_err(broken)?;
        let text = text.trim_end_matches(['\r', '\n']);
        match scan(text, &mut items)? {
            None => return Ok(items),
            Some(size) => {
                if size > MAX_LITERAL {
                    return Err(broken(format!("a literal of {size} bytes")));
                }
                let mut body = vec![0; size];
                r.read_exact(&mut body).await.map_err(broken)?;
                items.push(Item::Text(String::from_utf8(body).map_err(broken)?));
                // The line goes on after the literal.
            }
        }
    }
}

/// Scans `text` into `items`; a literal's size if the line ends with one (`{N}` / `{N+}`).
fn scan(text: &str, items: &mut Vec<Item>) -> Result<Option<usize>> {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' => {}
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some((_, '\\')) => match chars.next() {
                            Some((_, e)) => s.push(e),
                            None => return Err(broken("a quoted string ends in \\")),
                        },
                        Some((_, '"')) => break,
                        Some((_, ch)) => s.push(ch),
                        None => return Err(broken("a quoted string is not closed")),
                    }
                }
                items.push(Item::Text(s));
            }
            '(' => {
                let end = text[at..]
                    .find(')')
                    .ok_or_else(|| broken("a response code is not closed"))?;
                items.push(Item::Code(text[at + 1..at + end].to_string()));
                while chars.peek().is_some_and(|(i, _)| *i <= at + end) {
                    chars.next();
                }
            }
            '{' => {
                let rest = &text[at + 1..];
                let digits = rest.trim_end_matches('}').trim_end_matches('+');
                if !rest.ends_with('}') || digits.is_empty() {
                    return Err(broken(format!("{text:?}")));
                }
                return digits.parse().map(Some).map_err(broken);
            }
            _ => {
                let end = text[at..].find([' ', '(']).map_or(text.len(), |e| at + e);
                items.push(Item::Atom(text[at..end].to_string()));
                while chars.peek().is_some_and(|(i, _)| *i < end) {
                    chars.next();
                }
            }
        }
    }
    Ok(None)
}

/// A string as a command argument: a literal (`{N+}`), which carries any bytes as they are.
pub fn literal(text: &str) -> String {
    format!("{{{}+}}\r\n{text}", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn said(wire: &str) -> (Vec<Vec<Item>>, Ended) {
        let mut r = tokio::io::BufReader::new(wire.as_bytes());
        read(&mut r).await.unwrap()
    }

    #[tokio::test]
    async fn lines_strings_literals_and_codes_are_read_as_sent() {
        let (lines, ended) = said(
            "\"IMPLEMENTATION\" \"Dovecot (Debian) Pigeonhole\"\r\n\"SASL\" \"PLAIN\"\r\nOK \"Ready.\"\r\n",
        )
        .await;
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            [
                Item::Text("IMPLEMENTATION".into()),
                Item::Text("Dovecot (Debian) Pigeonhole".into())
            ]
        );
        assert!(ended.ok);
        let (lines, ended) = said("{12}\r\nkeep;\r\nstop;\r\nOK\r\n").await;
        assert_eq!(lines, [[Item::Text("keep;\r\nstop;".into())]]);
        assert!(ended.ok && ended.text.is_none());
        let (_, ended) = said("NO (QUOTA/MAXSIZE) \"Too \\\"big\\\".\"\r\n").await;
        assert!(!ended.ok);
        assert_eq!(ended.code.as_deref(), Some("QUOTA/MAXSIZE"));
        assert_eq!(ended.text.as_deref(), Some("Too \"big\"."));
        let (_, ended) = said("NO {21}\r\nline 2: error here.\r\n\r\n").await;
        assert_eq!(ended.text.as_deref(), Some("line 2: error here.\r\n"));
        let (lines, _) = said("\"mine\" ACTIVE\r\n\"other\"\r\nOK\r\n").await;
        assert_eq!(lines[0][1], Item::Atom("ACTIVE".into()));
    }

    #[tokio::test]
    async fn a_broken_answer_is_an_error_not_a_guess() {
        for wire in ["\"open\r\n", "{x}\r\n", "(CODE\r\n", ""] {
            let mut r = tokio::io::BufReader::new(wire.as_bytes());
            assert!(read(&mut r).await.is_err(), "{wire:?}");
        }
    }
}
