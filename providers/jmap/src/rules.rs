//! A JMAP account's server-side rules. No JMAP server here offers RFC 9661's Sieve over
//! JMAP, but Cyrus serves ManageSieve beside it on the session's own host: the rules are
//! kept there (`mailbroker_managesieve::account`), signed in with the account's password,
//! over STARTTLS when the session is https. A server that offers neither (Fastmail) gets
//! `unsupported` with a next step.

use mailbroker_core::{Error, Result, Rule, RulesBefore, ServerRule};
use mailbroker_managesieve::Client;
use mailbroker_managesieve::account::{self, DEFAULT_PORT, Endpoint, Io};

use crate::{Auth, JmapSettings, TagMode};

/// What a session needs to reach the account's rules.
pub struct Access {
    pub settings: JmapSettings,
    pub auth: Auth,
}

fn no_sieve(why: &str) -> Error {
    Error::unsupported(format!(
        "mailbroker cannot keep rules on this JMAP account: {why}"
    ))
    .with_next_step(
        "make the rule in the provider's own settings (Fastmail: Settings → Filters & Rules)",
    )
}

/// Refuses what a JMAP account's rules cannot say: tags kept as mailboxes (a Sieve rule adds
/// keywords).
pub fn check(rule: &Rule, tags: TagMode) -> Result<()> {
    if tags == TagMode::Mailboxes && !rule.then.add_tags.is_empty() {
        return Err(Error::validation(
            "this account keeps tags as mailboxes, which a server-side rule here cannot add",
        )
        .with_next_step("use --move-to, --read or --flag in the rule"));
    }
    Ok(())
}

async fn open(access: &Access) -> Result<Client<Box<dyn Io>>> {
    let Auth::Basic { username, password } = &access.auth else {
        return Err(no_sieve(
            "it signs in with a token, and ManageSieve takes the account's password",
        ));
    };
    let url = url::Url::parse(&access.settings.url)
        .map_err(|e| Error::validation(format!("the JMAP URL: {e}")))?;
    let host = url
        .host_str()
        .ok_or_else(|| Error::validation("the JMAP URL names no host"))?;
    let tls = match url.scheme() {
        "https" => {
            let pem = match &access.settings.ca_file {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    Error::validation(format!("cannot read the CA file {path}: {e}"))
                })?),
                None => None,
            };
            Some(account::tls(pem.as_deref())?)
        }
        _ => None,
    };
    account::open(&Endpoint {
        host: host.trim_start_matches('[').trim_end_matches(']'),
        port: access.settings.sieve_port.unwrap_or(DEFAULT_PORT),
        tls,
        username,
        password,
    })
    .await
}

pub async fn read(access: &Access) -> Result<Vec<ServerRule>> {
    account::read(open(access).await?).await
}

pub async fn put(access: &Access, rules: &[(Rule, Option<String>)]) -> Result<RulesBefore> {
    for (rule, _) in rules {
        check(rule, access.settings.tags)?;
    }
    account::put(open(access).await?, rules).await
}

pub async fn restore(access: &Access, before: &RulesBefore) -> Result<RulesBefore> {
    account::restore(open(access).await?, before).await
}
