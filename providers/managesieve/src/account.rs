//! An account's rules kept by its server's ManageSieve, whichever provider owns the account
//! (IMAP on Dovecot or Cyrus, JMAP on Cyrus): opened on the account's host, over STARTTLS
//! unless the account itself is plain on this machine, signed in with its own login.
//!
//! mailbroker's rules go in the person's active script as its delimited part (`section`), or
//! in a script of its own (`mailbroker`) when the person has none. Every write is checked by
//! the server (`CHECKSCRIPT`) before it is put, and read back after; what was there before is
//! returned for an undo, byte for byte.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mailbroker_core::{Error, MailboxInfo, Result, Role, Rule, RulesBefore, ServerRule};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use crate::{Client, section, sieve};

/// ManageSieve's port (RFC 5804).
pub const DEFAULT_PORT: u16 = 4190;
/// The script mailbroker writes when the person has no active script of their own.
const OURS: &str = "mailbroker";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A byte stream a session runs over: plain TCP, or TLS after STARTTLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A TLS client trusting the public roots and, for a server with a private CA, `ca_pem`'s
/// certificates: the one setup of the mail protocols spoken over a raw stream (IMAP and
/// ManageSieve).
pub fn tls(ca_pem: Option<&[u8]>) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = ca_pem {
        let mut reader = pem;
        let mut added = 0;
        for cert in rustls_pemfile::certs(&mut reader) {
            let cert = cert.map_err(|e| Error::validation(format!("ca file is not PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| Error::validation(format!("ca file certificate rejected: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::validation("ca file holds no PEM certificate"));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("tls setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Where an account's scripts are kept and how to reach them.
pub struct Endpoint<'a> {
    pub host: &'a str,
    pub port: u16,
    /// The TLS STARTTLS secures the session with; `None` only for an account that is plain
    /// on this machine (the provider checked that).
    pub tls: Option<Arc<ClientConfig>>,
    pub username: &'a str,
    pub password: &'a str,
}

/// Connects, secures and signs in.
pub async fn open(at: &Endpoint<'_>) -> Result<Client<Box<dyn Io>>> {
    let addr = format!("{}:{}", at.host, at.port);
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addr))
        .await
        .map_err(|_| Error::provider_unavailable(format!("{addr} did not answer in time")))?
        .map_err(|e| {
            Error::unsupported(format!("no ManageSieve server answers at {addr}: {e}"))
                .with_next_step(
                    "if the server keeps rules on another port, set it: mailbroker account add … --sieve-port PORT",
                )
        })?;
    let mut client = Client::greet(Box::new(tcp) as Box<dyn Io>).await?;
    if let Some(tls) = &at.tls {
        if !client.capabilities.starttls {
            return Err(Error::unsupported(format!(
                "the ManageSieve server at {addr} offers no STARTTLS: the password would cross in clear text"
            )));
        }
        client.starttls().await?;
        let name = ServerName::try_from(at.host.to_string())
            .map_err(|_| Error::validation(format!("{:?} is not a valid host name", at.host)))?;
        let secured = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TlsConnector::from(tls.clone()).connect(name, client.into_inner()),
        )
        .await
        .map_err(|_| Error::provider_unavailable(format!("tls handshake with {addr} timed out")))?
        .map_err(|e| {
            Error::provider_unavailable(format!("tls handshake with {addr} failed: {e}"))
                .with_next_step("check the host name, or pass the server's CA with --ca-file PEM")
        })?;
        client = Client::greet(Box::new(secured) as Box<dyn Io>).await?;
    }
    client.authenticate(at.username, at.password).await?;
    Ok(client)
}

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

/// `rules` each with the mailbox its move names among `mailboxes`.
pub fn placed(rules: &[Rule], mailboxes: &[MailboxInfo]) -> Result<Vec<(Rule, Option<String>)>> {
    let choices = choices(mailboxes);
    (rules.iter())
        .map(|rule| Ok((rule.clone(), target(rule, &choices)?)))
        .collect()
}

/// The rules on the server: mailbroker's (from its part of the active script) and each of
/// the person's scripts.
pub async fn read(mut client: Client<Box<dyn Io>>) -> Result<Vec<ServerRule>> {
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
pub async fn put(
    mut client: Client<Box<dyn Io>>,
    rules: &[(Rule, Option<String>)],
) -> Result<RulesBefore> {
    let translated = (rules.iter())
        .map(|(rule, mailbox)| sieve::translate(rule, mailbox.as_deref()))
        .collect::<Result<Vec<_>>>()?;
    let part = sieve::part(&translated);
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
    encode(&Before {
        active,
        scripts: BTreeMap::from([(target, current)]),
    })
}

/// Puts the scripts back as `before` says they were, and reads each back; what they were
/// just before, so that the restore can be undone in turn.
pub async fn restore(mut client: Client<Box<dyn Io>>, before: &RulesBefore) -> Result<RulesBefore> {
    let before: Before = serde_json::from_str(&before.0)
        .map_err(|e| Error::internal(format!("a rule change's earlier state: {e}")))?;
    let listed = client.list().await?;
    let mut now = Before {
        active: listed.iter().find(|s| s.active).map(|s| s.name.clone()),
        scripts: BTreeMap::new(),
    };
    for name in before.scripts.keys() {
        let text = match listed.iter().any(|s| s.name == *name) {
            true => Some(client.get(name).await?),
            false => None,
        };
        now.scripts.insert(name.clone(), text);
    }
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
    client.logout().await?;
    encode(&now)
}

fn encode(before: &Before) -> Result<RulesBefore> {
    serde_json::to_string(before)
        .map(RulesBefore)
        .map_err(|e| Error::internal(e.to_string()))
}
