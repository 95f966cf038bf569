//! The account's server-side rules, kept by its server's ManageSieve (Dovecot's Pigeonhole,
//! Cyrus's timsieved) on the IMAP host, signed in with the IMAP login, over STARTTLS unless
//! the account itself is plain on this machine (`mailbroker_managesieve::account`).

use mailbroker_core::{Result, Rule, RulesBefore, ServerRule};
use mailbroker_managesieve::account::{self, DEFAULT_PORT, Endpoint};

use crate::connect::{ImapConfig, TlsMode};

async fn open(config: &ImapConfig) -> Result<mailbroker_managesieve::Client<Box<dyn account::Io>>> {
    config.check_plaintext()?;
    let tls = match config.tls {
        TlsMode::None => None,
        _ => Some(account::tls(config.ca_pem.as_deref())?),
    };
    account::open(&Endpoint {
        host: &config.host,
        port: config.sieve_port.unwrap_or(DEFAULT_PORT),
        tls,
        username: &config.username,
        password: &config.password,
    })
    .await
}

pub async fn read(config: &ImapConfig) -> Result<Vec<ServerRule>> {
    account::read(open(config).await?).await
}

pub async fn put(config: &ImapConfig, rules: &[(Rule, Option<String>)]) -> Result<RulesBefore> {
    account::put(open(config).await?, rules).await
}

pub async fn restore(config: &ImapConfig, before: &RulesBefore) -> Result<RulesBefore> {
    account::restore(open(config).await?, before).await
}
