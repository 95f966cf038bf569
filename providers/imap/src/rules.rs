//! The account's server-side rules, kept by its server's ManageSieve (Dovecot's Pigeonhole,
//! Cyrus's timsieved) on the IMAP host, signed in with the IMAP login, over STARTTLS unless
//! the account itself is plain on this machine.
//!
//! mailbroker's rules go in the person's active script as its delimited part
//! (`mailbroker_managesieve::section`), or in a script of its own (`mailbroker`) when the
//! person has none. Every write is checked by the server (`CHECKSCRIPT`) before it is put,
//! and read back after; what was there before is returned for an undo, byte for byte.

use std::collections::BTreeMap;

use mailbroker_core::{Error, MailboxInfo, Result, Role, Rule, RulesBefore, ServerRule};
use mailbroker_managesieve::{Client, section, sieve};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use crate::connect::{CONNECT_TIMEOUT, ImapConfig, TlsMode, Transport, timed, tls_wrap};

/// ManageSieve's port (RFC 5804).
pub const DEFAULT_PORT: u16 = 4190;
/// The script mailbroker writes when the person has no active script of their own.
const OURS: &str = "mailbroker";

/// What the scripts were before a change: which was active, and each touched script's text
/// (`None`: it did not exist).
#[derive(Debug, Serialize, Deserialize)]
struct Before {
    active: Option<String>,
    scripts: BTreeMap<String, Option<String>>,
}

/// The mailbox `rule` moves mail to, among the account's `mailboxes`: a role's mailbox or one
/// named exactly; a name that is not there is refused (a typo would make a new mailbox), and
/// so is the trash (a rule never deletes).
pub fn target(rule: &Rule, mailboxes: &[(String, Option<Role>)]) -> Result<Option<String>> {
    let Some(wanted) = rule.then.move_to.as_deref() else {
        return Ok(None);
    };
    let found = match Role::parse(wanted) {
        Some(role) => mailboxes.iter().find(|(_, r)| *r == Some(role)),
        None => mailboxes.iter().find(|(name, _)| name == wanted),
    };
    let Some((name, role)) = found else {
        return Err(Error::validation(format!(
            "the account has no mailbox {wanted:?} for the rule to move mail to"
        ))
        .with_next_step("name a mailbox the account has (mailbroker mailboxes), or a role"));
    };
    if *role == Some(Role::Trash) {
        return Err(Error::validation(
            "a rule never moves arriving mail to the trash: that would delete it unseen",
        )
        .with_next_step("move it to an archive or a mailbox of its own, or tag it"));
    }
    Ok(Some(name.clone()))
}

/// `rule` as the Sieve block it will be, its move resolved among `mailboxes`.
pub fn text(rule: &Rule, mailboxes: &[(String, Option<Role>)]) -> Result<String> {
    let mailbox = target(rule, mailboxes)?;
    Ok(sieve::translate(rule, mailbox.as_deref())?.text)
}

/// The selectable ones of `mailboxes`, as a rule's move is resolved among them.
pub fn choices(mailboxes: &[MailboxInfo]) -> Vec<(String, Option<Role>)> {
    (mailboxes.iter())
        .filter(|m| m.selectable)
        .map(|m| (m.name.as_str().to_string(), m.role))
        .collect()
}

async fn open(config: &ImapConfig) -> Result<Client<Transport>> {
    config.check_plaintext()?;
    let port = config.sieve_port.unwrap_or(DEFAULT_PORT);
    let addr = format!("{}:{port}", config.host);
    let tcp = timed("connect", CONNECT_TIMEOUT, TcpStream::connect(&addr))
        .await?
        .map_err(|e| {
            Error::unsupported(format!("no ManageSieve server answers at {addr}: {e}"))
                .with_next_step(
                    "if the server keeps rules on another port, set it: mailbroker account add … --sieve-port PORT",
                )
        })?;
    let mut client = Client::greet(Transport::Plain(tcp)).await?;
    if config.tls != TlsMode::None {
        if !client.capabilities.starttls {
            return Err(Error::unsupported(format!(
                "the ManageSieve server at {addr} offers no STARTTLS: the password would cross in clear text"
            )));
        }
        client.starttls().await?;
        let Transport::Plain(tcp) = client.into_inner() else {
            return Err(Error::internal("ManageSieve: TLS twice"));
        };
        client = Client::greet(tls_wrap(config, tcp).await?).await?;
    }
    client
        .authenticate(&config.username, &config.password)
        .await?;
    Ok(client)
}

/// The rules on the server: mailbroker's (from its part of the active script) and each of
/// the person's scripts.
pub async fn read(config: &ImapConfig) -> Result<Vec<ServerRule>> {
    let mut client = open(config).await?;
    let mut out = Vec::new();
    for script in client.list().await? {
        let text = client.get(&script.name).await?;
        for name in section::rule_names(&text) {
            out.push(ServerRule {
                name,
                ours: true,
                enabled: script.active,
                forwards: false,
            });
        }
        if !section::persons(&text).trim().is_empty() {
            out.push(ServerRule {
                name: script.name.clone(),
                ours: false,
                enabled: script.active,
                forwards: section::forwards(&text),
            });
        }
    }
    client.logout().await?;
    Ok(out)
}

/// Makes `rules` (each with the mailbox its move names, a role already resolved) the whole
/// of mailbroker's rules on the server; what was there before, for an undo.
pub async fn put(config: &ImapConfig, rules: &[(Rule, Option<String>)]) -> Result<RulesBefore> {
    let translated = (rules.iter())
        .map(|(rule, mailbox)| sieve::translate(rule, mailbox.as_deref()))
        .collect::<Result<Vec<_>>>()?;
    let part = sieve::part(&translated);
    let mut client = open(config).await?;
    let needed: Vec<&str> = part.requires.iter().map(String::as_str).collect();
    let missing = client.capabilities.missing(&needed);
    if !missing.is_empty() {
        return Err(Error::unsupported(format!(
            "the server's Sieve lacks {}, which these rules need",
            missing.join(", ")
        )));
    }
    let scripts = client.list().await?;
    let active = scripts.iter().find(|s| s.active).map(|s| s.name.clone());
    let target = active.clone().unwrap_or_else(|| OURS.to_string());
    let current = match scripts.iter().any(|s| s.name == target) {
        true => Some(client.get(&target).await?),
        false => None,
    };
    let own = section::persons(current.as_deref().unwrap_or(""));
    let new = match rules.is_empty() {
        true => own,
        false => section::splice(&own, &part),
    };
    client.check(&new).await?;
    client.put(&target, &new).await?;
    if client.get(&target).await? != new {
        return Err(Error::provider_write_failed(format!(
            "the server keeps script {target:?} otherwise than it was written"
        )));
    }
    if active.is_none() && !rules.is_empty() {
        client.set_active(&target).await?;
    }
    client.logout().await?;
    let before = Before {
        active,
        scripts: BTreeMap::from([(target, current)]),
    };
    serde_json::to_string(&before)
        .map(RulesBefore)
        .map_err(|e| Error::internal(e.to_string()))
}

/// Puts the scripts back as `before` says they were, and reads each back.
pub async fn restore(config: &ImapConfig, before: &RulesBefore) -> Result<()> {
    let before: Before = serde_json::from_str(&before.0)
        .map_err(|e| Error::internal(format!("a rule change's earlier state: {e}")))?;
    let mut client = open(config).await?;
    for (name, text) in &before.scripts {
        match text {
            Some(text) => {
                client.put(name, text).await?;
                if client.get(name).await? != *text {
                    return Err(Error::provider_write_failed(format!(
                        "script {name:?} did not come back as it was"
                    )));
                }
            }
            None => {
                let listed = client.list().await?;
                if listed.iter().any(|s| s.name == *name && s.active) {
                    client.set_active("").await?;
                }
                if listed.iter().any(|s| s.name == *name) {
                    client.delete(name).await?;
                }
            }
        }
    }
    client
        .set_active(before.active.as_deref().unwrap_or(""))
        .await?;
    client.logout().await
}
