//! Query text to an expression tree: words, `OR`/`|`, `AND`, `( … )`, Gmail's `{ … }` (any
//! of), and `-` before a word or a group. NOT binds tightest, then AND (words side by side),
//! then OR: `a b OR c` is `(a AND b) OR c`.
//!
//! Recursion is bounded: groups nest at most `MAX_DEPTH` deep, and a run of dashes is
//! counted, not recursed into.

use mailbroker_core::Error;

use super::{Expr, MAX_DEPTH, MAX_TERMS, terms::term_of};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A term's text (`from:alice`, `"big news"`).
    Word(String),
    /// `(`, or `{` (its items are alternatives).
    Open {
        any_of: bool,
    },
    Close {
        any_of: bool,
    },
    Or,
    And,
}

#[derive(Debug, Clone)]
struct Token {
    /// 1-based character position, for error messages.
    pos: usize,
    /// Leading dashes: an odd number negates.
    dashes: usize,
    kind: Kind,
}

fn is_group_char(c: char) -> bool {
    matches!(c, '(' | ')' | '{' | '}')
}

fn tokens(input: &str) -> Result<Vec<Token>, Error> {
    let chars: Vec<char> = input.chars().collect();
    // A NUL would end the full-text query early inside SQLite; no query needs any of these.
    if let Some(at) = chars
        .iter()
        .position(|c| c.is_control() && !c.is_whitespace())
    {
        return Err(Error::validation(format!(
            "the query has a control character (U+{:04X}) at position {}",
            u32::from(chars[at]),
            at + 1
        ))
        .with_next_step("leave control characters out of the query"));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let pos = i + 1;
        let dashes = chars[i..].iter().take_while(|c| **c == '-').count();
        i += dashes;
        let next = chars.get(i).copied();
        let kind = match next {
            Some(c @ ('(' | '{')) => {
                i += 1;
                Kind::Open { any_of: c == '{' }
            }
            // Dashes on their own (or before a closing bracket) are a word, not a negation.
            None | Some(')' | '}') if dashes > 0 => {
                out.push(Token {
                    pos,
                    dashes: 0,
                    kind: Kind::Word("-".repeat(dashes)),
                });
                continue;
            }
            Some(c) if c.is_whitespace() => {
                out.push(Token {
                    pos,
                    dashes: 0,
                    kind: Kind::Word("-".repeat(dashes)),
                });
                continue;
            }
            Some(c @ (')' | '}')) => {
                i += 1;
                Kind::Close { any_of: c == '}' }
            }
            Some('|') if dashes == 0 && chars.get(i + 1).is_none_or(|c| c.is_whitespace()) => {
                i += 1;
                Kind::Or
            }
            _ => {
                let (word, end) = word_at(&chars, i, pos)?;
                i = end;
                match word.as_str() {
                    "OR" if dashes == 0 => Kind::Or,
                    "AND" if dashes == 0 => Kind::And,
                    _ => Kind::Word(word),
                }
            }
        };
        out.push(Token { pos, dashes, kind });
    }
    Ok(out)
}

/// The word starting at `start`: up to whitespace or a bracket outside quotes.
fn word_at(chars: &[char], start: usize, pos: usize) -> Result<(String, usize), Error> {
    let mut word = String::new();
    let mut quoted = false;
    let mut i = start;
    while let Some(&c) = chars.get(i) {
        if !quoted && (c.is_whitespace() || is_group_char(c)) {
            break;
        }
        if c == '"' {
            quoted = !quoted;
        }
        word.push(c);
        i += 1;
    }
    if quoted {
        return Err(Error::validation(format!(
            "unclosed quote in query at position {pos}: {word}"
        ))
        .with_next_step("close the quote, or leave the quote character out"));
    }
    if word.ends_with(':') && chars.get(i).is_some_and(|c| matches!(c, '(' | '{')) {
        return Err(Error::unsupported(format!(
            "a group after a field ({word}( … ), at position {pos}) is not supported"
        ))
        .with_next_step(format!(
            "name the field in each term: ({word}a {word}b), or {{{word}a {word}b}} for any of them"
        )));
    }
    Ok((word, i))
}

/// Parses `input` into one expression; no words at all is `Expr::And(vec![])` (everything).
pub(super) fn parse_expr(input: &str, now: i64) -> Result<Expr, Error> {
    let tokens = tokens(input)?;
    let words = tokens
        .iter()
        .filter(|t| matches!(t.kind, Kind::Word(_)))
        .count();
    if words > MAX_TERMS {
        return Err(Error::validation(format!(
            "the query has {words} terms; at most {MAX_TERMS} are allowed"
        ))
        .with_next_step("narrow it with fewer, broader terms"));
    }
    let mut parser = Parser { tokens, at: 0, now };
    if parser.tokens.is_empty() {
        return Ok(Expr::And(Vec::new()));
    }
    let expr = parser.or(0)?;
    match parser.peek() {
        None => Ok(expr),
        Some(t) => Err(parser.unexpected(t)),
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    now: i64,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn unexpected(&self, t: &Token) -> Error {
        let what = match &t.kind {
            Kind::Close { any_of: false } => "a ) without its (".to_string(),
            Kind::Close { any_of: true } => "a } without its {".to_string(),
            Kind::Or => "OR with no term before it".to_string(),
            Kind::And => "AND with no term before it".to_string(),
            other => format!("{other:?}"),
        };
        Error::validation(format!("{what} at position {}", t.pos))
            .with_next_step("check the brackets and that OR and AND stand between terms")
    }

    /// `and (OR and)*`
    fn or(&mut self, depth: usize) -> Result<Expr, Error> {
        let mut items = vec![self.and(depth)?];
        while let Some(t) = self.peek().filter(|t| t.kind == Kind::Or).cloned() {
            self.at += 1;
            if !self.starts_term() {
                return Err(Error::validation(format!(
                    "OR at position {} has no term after it",
                    t.pos
                ))
                .with_next_step("put a term on each side of OR"));
            }
            items.push(self.and(depth)?);
        }
        Ok(Expr::any(items))
    }

    /// `unary (AND? unary)*`
    fn and(&mut self, depth: usize) -> Result<Expr, Error> {
        let mut items = Vec::new();
        loop {
            match self.peek().map(|t| &t.kind) {
                Some(Kind::And) => {
                    let t = self.next().map_or(0, |t| t.pos);
                    if items.is_empty() || !self.starts_term() {
                        return Err(Error::validation(format!(
                            "AND at position {t} needs a term on each side"
                        ))
                        .with_next_step("leave AND out: terms side by side must all hold"));
                    }
                }
                Some(Kind::Word(_) | Kind::Open { .. }) => items.push(self.unary(depth)?),
                _ => break,
            }
        }
        match self.peek() {
            Some(t) if items.is_empty() => Err(self.unexpected(t)),
            _ => Ok(Expr::all(items)),
        }
    }

    fn starts_term(&self) -> bool {
        matches!(
            self.peek().map(|t| &t.kind),
            Some(Kind::Word(_) | Kind::Open { .. })
        )
    }

    /// A word or a group, negated by an odd number of dashes.
    fn unary(&mut self, depth: usize) -> Result<Expr, Error> {
        let Some(t) = self.next() else {
            return Err(Error::validation(
                "the query ends where a term was expected",
            ));
        };
        let expr = match t.kind {
            Kind::Word(word) => Expr::Term(
                term_of(&word, self.now)
                    .map_err(|e| e.context(format!("at position {}", t.pos)))?,
            ),
            Kind::Open { any_of } => self.group(any_of, t.pos, depth)?,
            _ => return Err(self.unexpected(&t)),
        };
        Ok(if t.dashes % 2 == 1 {
            Expr::Not(Box::new(expr))
        } else {
            expr
        })
    }

    /// The inside of `( … )` (an expression) or `{ … }` (alternatives), and its closing one.
    fn group(&mut self, any_of: bool, pos: usize, depth: usize) -> Result<Expr, Error> {
        if depth >= MAX_DEPTH {
            return Err(Error::validation(format!(
                "brackets nest more than {MAX_DEPTH} deep at position {pos}"
            ))
            .with_next_step("write the query with fewer nested groups"));
        }
        let inner = if any_of {
            let mut items = Vec::new();
            loop {
                if self.peek().is_some_and(|t| t.kind == Kind::Or) {
                    self.at += 1; // `{a OR b}` says the same as `{a b}`
                } else if self.starts_term() {
                    items.push(self.unary(depth + 1)?);
                } else {
                    break;
                }
            }
            Expr::any(items)
        } else if self.starts_term() {
            self.or(depth + 1)?
        } else {
            Expr::any(Vec::new())
        };
        if matches!(&inner, Expr::Or(items) if items.is_empty()) {
            return Err(
                Error::validation(format!("the group at position {pos} is empty"))
                    .with_next_step("put terms inside the brackets, or leave them out"),
            );
        }
        match self.next() {
            Some(Token {
                kind: Kind::Close { any_of: closing },
                ..
            }) if closing == any_of => Ok(inner),
            Some(t) => Err(self.unexpected(&t)),
            None => Err(Error::validation(format!(
                "the {} at position {pos} is never closed",
                if any_of { "{" } else { "(" }
            ))
            .with_next_step("close every bracket you open")),
        }
    }
}
