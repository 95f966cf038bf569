//! A ManageSieve session: the greeting's capabilities, `AUTHENTICATE "PLAIN"`, and the
//! commands that read, check and write scripts. Every wait has a time limit; credentials go
//! to the server only, never into an error.

use std::time::Duration;

use base64::Engine;
use mailbroker_core::{Error, Result};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::response::{self, Ended, Item};

const TIMEOUT: Duration = Duration::from_secs(60);

/// What the server announced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub implementation: String,
    pub sasl: Vec<String>,
    /// The Sieve extensions it runs (`fileinto`, `imap4flags`, `mailbox`, …).
    pub sieve: Vec<String>,
    pub starttls: bool,
}

impl Capabilities {
    fn of(lines: &[Vec<Item>]) -> Capabilities {
        let mut caps = Capabilities::default();
        for line in lines {
            let (name, value) = match line.as_slice() {
                [Item::Text(name)] => (name.to_ascii_uppercase(), ""),
                [Item::Text(name), Item::Text(value), ..] => {
                    (name.to_ascii_uppercase(), value.as_str())
                }
                _ => continue,
            };
            let words = || value.split_whitespace().map(str::to_string).collect();
            match name.as_str() {
                "IMPLEMENTATION" => caps.implementation = value.to_string(),
                "SASL" => caps.sasl = words(),
                "SIEVE" => caps.sieve = words(),
                "STARTTLS" => caps.starttls = true,
                _ => {}
            }
        }
        caps
    }

    /// The extensions of `needed` the server does not run.
    pub fn missing<'a>(&self, needed: &[&'a str]) -> Vec<&'a str> {
        let has = |e: &str| self.sieve.iter().any(|s| s.eq_ignore_ascii_case(e));
        needed.iter().copied().filter(|e| !has(e)).collect()
    }
}

/// A script on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub name: String,
    pub active: bool,
}

/// A ManageSieve session over `S`.
pub struct Client<S> {
    io: BufReader<S>,
    pub capabilities: Capabilities,
}

async fn timed<T>(what: &str, f: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(TIMEOUT, f).await.map_err(|_| {
        Error::provider_unavailable(format!("the Sieve server did not answer {what} in time"))
    })?
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    /// Reads the server's greeting (its capabilities) from a fresh connection, or from one
    /// just secured by STARTTLS, after which the server announces them again.
    pub async fn greet(stream: S) -> Result<Client<S>> {
        let mut io = BufReader::new(stream);
        let (lines, ended) = timed("its greeting", response::read(&mut io)).await?;
        if !ended.ok {
            return Err(ended.refused("the connection"));
        }
        Ok(Client {
            io,
            capabilities: Capabilities::of(&lines),
        })
    }

    /// Asks for TLS; the caller wraps `into_inner()` and greets again.
    pub async fn starttls(&mut self) -> Result<()> {
        self.command("STARTTLS", "STARTTLS").await.map(drop)
    }

    pub fn into_inner(self) -> S {
        self.io.into_inner()
    }

    /// Sends `line` (CRLF added) and reads its answer: the lines before the response.
    async fn command(&mut self, what: &str, line: &str) -> Result<Vec<Vec<Item>>> {
        let (lines, ended) = self.exchange(what, line).await?;
        match ended.ok {
            true => Ok(lines),
            false => Err(ended.refused(what)),
        }
    }

    async fn exchange(&mut self, what: &str, line: &str) -> Result<(Vec<Vec<Item>>, Ended)> {
        let io = &mut self.io;
        timed(what, async move {
            let sent = format!("{line}\r\n");
            let out = io.get_mut();
            out.write_all(sent.as_bytes()).await.map_err(lost)?;
            out.flush().await.map_err(lost)?;
            response::read(io).await
        })
        .await
    }

    /// Logs in with SASL PLAIN.
    pub async fn authenticate(&mut self, user: &str, password: &str) -> Result<()> {
        let plain =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        let (_, ended) = self
            .exchange(
                "AUTHENTICATE",
                &format!("AUTHENTICATE \"PLAIN\" \"{plain}\""),
            )
            .await?;
        match ended.ok {
            true => Ok(()),
            // The server's words only: never the credentials.
            false => Err(Error::auth_required(format!(
                "the Sieve server refused the account's credentials: {}",
                ended.text.as_deref().unwrap_or("no reason given").trim()
            ))
            .with_next_step("check the account's password; ManageSieve uses the IMAP login")),
        }
    }

    pub async fn list(&mut self) -> Result<Vec<Script>> {
        let lines = self.command("LISTSCRIPTS", "LISTSCRIPTS").await?;
        Ok(lines
            .into_iter()
            .filter_map(|line| match line.as_slice() {
                [Item::Text(name), rest @ ..] => Some(Script {
                    name: name.clone(),
                    active: rest
                        .iter()
                        .any(|i| matches!(i, Item::Atom(a) if a.eq_ignore_ascii_case("ACTIVE"))),
                }),
                _ => None,
            })
            .collect())
    }

    /// A script's text, byte for byte.
    pub async fn get(&mut self, name: &str) -> Result<String> {
        let lines = self
            .command(
                "GETSCRIPT",
                &format!("GETSCRIPT {}", response::literal(name)),
            )
            .await?;
        match lines.first().map(Vec::as_slice) {
            Some([Item::Text(text)]) => Ok(text.clone()),
            _ => Err(Error::provider_unavailable(format!(
                "the Sieve server sent no text for script {name:?}"
            ))),
        }
    }

    /// Asks the server whether `script` is valid Sieve for it; its error is a
    /// `validation_error` with the server's words (the line and what is wrong).
    pub async fn check(&mut self, script: &str) -> Result<()> {
        let (_, ended) = self
            .exchange(
                "CHECKSCRIPT",
                &format!("CHECKSCRIPT {}", response::literal(script)),
            )
            .await?;
        match ended.ok {
            true => Ok(()),
            false => Err(Error::validation(format!(
                "the Sieve server finds the script invalid: {}",
                ended.text.as_deref().unwrap_or("no reason given").trim()
            ))),
        }
    }

    pub async fn put(&mut self, name: &str, script: &str) -> Result<()> {
        let line = format!(
            "PUTSCRIPT {} {}",
            response::literal(name),
            response::literal(script)
        );
        self.command("PUTSCRIPT", &line).await.map(drop)
    }

    /// Makes `name` the active script; `""` leaves none active.
    pub async fn set_active(&mut self, name: &str) -> Result<()> {
        let line = format!("SETACTIVE {}", response::literal(name));
        self.command("SETACTIVE", &line).await.map(drop)
    }

    pub async fn delete(&mut self, name: &str) -> Result<()> {
        let line = format!("DELETESCRIPT {}", response::literal(name));
        self.command("DELETESCRIPT", &line).await.map(drop)
    }

    pub async fn logout(mut self) -> Result<()> {
        self.command("LOGOUT", "LOGOUT").await.map(drop)
    }
}

fn lost(e: std::io::Error) -> Error {
    Error::provider_unavailable(format!("the connection to the Sieve server broke: {e}"))
}
