//! The JMAP adapter's offline half: setup (the session and the mailbox list), the connector
//! (settings and the stored password or token), the doctor, keyword rules and plans.

use async_trait::async_trait;
use mailbroker_core::{
    AccountInfo, Adapter, Capabilities, Connector, DeleteBatch, DeleteMode, DoctorReport, Error,
    NewAccount, Provider, ProviderKind, Ready, Result, Secrets, WriteBatch,
};
use serde::{Deserialize, Serialize};

use crate::{Auth, JmapProvider, TagMode};

/// The secret's kind in the store: the password (Basic) or the token (Bearer).
pub const SECRET_KIND: &str = "jmap";
/// RFC 8621 §4.1.1: a keyword is 1–255 characters.
const MAX_KEYWORD_LEN: u32 = 255;
/// Characters a keyword may not hold (it is an IMAP atom: RFC 8621 §4.1.1).
const KEYWORD_SPECIALS: &[char] = &['(', ')', '{', ']', '%', '*', '"', '\\'];

/// What `setup` stores of a JMAP account (no secret).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JmapSettings {
    /// The session resource, or a server whose `/.well-known/jmap` leads to it.
    pub url: String,
    pub username: String,
    /// `basic` (a password) or `bearer` (a token).
    pub auth: String,
    /// A CA (PEM) trusted beside the public roots, for a server with a private one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Other https origins the session's URLs may name, which its credentials may go to
    /// (`--trust-origin`): by default only the session's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_origins: Vec<String>,
    /// What a tag is: a keyword, or a mailbox beside the email's others.
    #[serde(default)]
    pub tags: TagMode,
    /// The session host's ManageSieve port, where the account's rules are kept (`None`:
    /// 4190).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sieve_port: Option<u16>,
}

impl JmapSettings {
    fn auth(&self, secret: String) -> Auth {
        match self.auth.as_str() {
            "bearer" => Auth::Bearer(secret),
            _ => Auth::Basic {
                username: self.username.clone(),
                password: secret,
            },
        }
    }

    /// Refuses a URL credentials may not go to (`mailbroker_core::endpoint`): plain `http://`
    /// to any host but this machine, a user name or password inside it; and a trusted origin
    /// that is not an https origin.
    pub fn check_plaintext(&self) -> Result<()> {
        mailbroker_core::endpoint::credential_url("the JMAP URL", &self.url)?;
        for origin in &self.trusted_origins {
            let url = mailbroker_core::endpoint::credential_url("--trust-origin", origin)?;
            if url.scheme() != "https" || url.path() != "/" || url.query().is_some() {
                return Err(Error::validation(format!(
                    "--trust-origin {origin} is not an https origin"
                ))
                .with_next_step("give it as https://host (or https://host:port)"));
            }
        }
        Ok(())
    }

    /// What the session trusts beyond the public roots and its own origin.
    fn trust(&self) -> crate::Trust {
        crate::Trust {
            ca_file: self.ca_file.clone(),
            origins: self.trusted_origins.clone(),
        }
    }
}

fn capabilities() -> Capabilities {
    Capabilities {
        extensions: vec!["JMAP".into()],
        custom_tags: true,
        max_tag_len: Some(MAX_KEYWORD_LEN),
    }
}

/// Opens the session (which checks the credentials) and reads the mailbox list: an account
/// to store.
pub async fn setup(
    settings: JmapSettings,
    secret: String,
    email: Option<String>,
) -> Result<NewAccount> {
    settings.check_plaintext()?;
    let auth = settings.auth(secret.clone());
    let mut jmap = JmapProvider::connect_with(&settings.url, auth, &settings.trust(), None)
        .await?
        .with_tags(settings.tags);
    let mailboxes = jmap.list_mailboxes().await?;
    let address = settings
        .username
        .contains('@')
        .then(|| settings.username.clone());
    Ok(NewAccount {
        provider: ProviderKind::Jmap,
        email: email.or(address),
        settings: serde_json::to_value(&settings).map_err(|e| Error::internal(e.to_string()))?,
        capabilities: capabilities(),
        cursor: None,
        secret: Some((SECRET_KIND.to_string(), secret)),
        mailboxes,
    })
}

pub struct Jmap;

#[async_trait]
impl Adapter for Jmap {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Jmap
    }

    fn validate_tag(&self, account: &AccountInfo<'_>, tag: &str, _new: bool) -> Result<()> {
        let settings: JmapSettings = account.settings()?;
        match settings.tags {
            TagMode::Keywords => validate_keyword(tag),
            TagMode::Mailboxes => validate_label(tag),
        }
    }

    fn plan(&self, account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String> {
        let tags = account
            .settings::<JmapSettings>()
            .map_or(TagMode::Keywords, |s| s.tags);
        plan(batch, tags)
    }

    fn plan_delete(&self, _account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String> {
        let n = batch.targets.len();
        let what = match batch.mode {
            DeleteMode::Trash => format!(
                "Email/set moving {n} to {:?}",
                batch.trash.as_deref().unwrap_or("(no trash mailbox)")
            ),
            DeleteMode::Permanent => format!("Email/set destroying {n}"),
        };
        vec![
            format!(
                "jmap {}: Email/get of {n} (each still where it was staged)",
                batch.mailbox
            ),
            format!(
                "jmap {}: {what} with its Email/get read-back",
                batch.mailbox
            ),
        ]
    }

    fn rule_text(
        &self,
        _account: &AccountInfo<'_>,
        rule: &mailbroker_core::Rule,
        mailboxes: &[(String, Option<mailbroker_core::Role>)],
    ) -> Result<String> {
        mailbroker_managesieve::account::text(rule, mailboxes)
    }

    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>> {
        let settings: JmapSettings = account.settings()?;
        let secret = secrets.get(SECRET_KIND).await?;
        let auth = settings.auth(secret.clone());
        let provider =
            JmapProvider::connect_with(&settings.url, auth, &settings.trust(), account.cursor)
                .await?
                .with_tags(settings.tags)
                .with_rules(crate::rules::Access {
                    auth: settings.auth(secret),
                    settings,
                });
        Ok(Box::new(Ready(Box::new(provider))))
    }

    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<DoctorReport> {
        let settings: JmapSettings = account.settings()?;
        let mut jmap = self.connector(account, secrets).await?.connect().await?;
        let mailboxes = jmap.list_mailboxes().await?.len();
        Ok(DoctorReport {
            summary: format!(
                "{}: session ok at {} as {}, {mailboxes} mailboxes",
                account.id, settings.url, settings.username
            ),
            details: serde_json::json!({
                "account": account.id,
                "url": settings.url,
                "username": settings.username,
                "mailboxes": mailboxes,
            }),
        })
    }
}

/// A tag as a keyword: RFC 8621 §4.1.1's rules, and not one of the system keywords.
fn validate_keyword(tag: &str) -> Result<()> {
    let bad = tag
        .chars()
        .find(|c| !c.is_ascii_graphic() || KEYWORD_SPECIALS.contains(c));
    if tag.is_empty() || tag.len() > MAX_KEYWORD_LEN as usize || bad.is_some() {
        return Err(Error::validation(format!(
            "tag {tag:?} cannot be a JMAP keyword: 1–255 printable ASCII characters, no \
             spaces and none of ( ) {{ ] % * \" \\"
        ))
        .with_next_step("choose a tag of letters, digits and - _ / . only"));
    }
    if tag.starts_with('$') {
        return Err(Error::validation(format!(
            "tag {tag:?} starts with $, which JMAP keeps for system keywords"
        ))
        .with_next_step("use --read or --flag for $seen and $flagged; choose a tag without $"));
    }
    Ok(())
}

/// A tag as a label mailbox's path: a name a mailbox can have, and not a place (a role's
/// usual name); the write refuses any other mailbox with a role by the name it has there.
fn validate_label(tag: &str) -> Result<()> {
    const PLACES: [&str; 7] = [
        "inbox", "archive", "drafts", "sent", "junk", "spam", "trash",
    ];
    let problem = if tag.trim().is_empty() || tag.split('/').any(|s| s.trim().is_empty()) {
        Some("has an empty mailbox name")
    } else if tag.chars().any(char::is_control) {
        Some("contains a control character")
    } else if PLACES.iter().any(|p| p.eq_ignore_ascii_case(tag)) {
        Some("names a place, not a label")
    } else {
        None
    };
    match problem {
        Some(p) => Err(
            Error::validation(format!("tag {tag:?} {p}")).with_next_step(
                "choose a label name; use move_to (or --to) to change where a message is",
            ),
        ),
        None => Ok(()),
    }
}

/// What a write batch sends, in words.
fn plan(batch: &WriteBatch, tags: TagMode) -> Vec<String> {
    let n = batch.targets.len();
    let on = |b: bool| if b { "true" } else { "null" };
    let mut what = Vec::new();
    batch
        .op
        .read
        .inspect(|r| what.push(format!("$seen {}", on(*r))));
    batch
        .op
        .flagged
        .inspect(|f| what.push(format!("$flagged {}", on(*f))));
    let (add, remove) = match tags {
        TagMode::Keywords => ("true", "null"),
        TagMode::Mailboxes => ("mailbox joined", "mailbox left"),
    };
    what.extend(batch.op.add_tags.iter().map(|t| format!("{t} {add}")));
    what.extend(batch.op.remove_tags.iter().map(|t| format!("{t} {remove}")));
    if let Some(to) = &batch.move_to {
        what.push(format!("move to {to}"));
    }
    vec![
        format!(
            "jmap {}: Email/changes since the synced state (precondition)",
            batch.mailbox
        ),
        format!(
            "jmap {}: Email/set of {n} ({}) with its Email/get read-back",
            batch.mailbox,
            what.join(", ")
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> JmapSettings {
        JmapSettings {
            url: url.into(),
            username: "me".into(),
            auth: "basic".into(),
            ca_file: None,
            trusted_origins: Vec::new(),
            tags: TagMode::Keywords,
            sieve_port: None,
        }
    }

    #[test]
    fn plain_http_only_to_this_machine() {
        assert!(
            settings("http://127.0.0.1:8080/jmap")
                .check_plaintext()
                .is_ok()
        );
        assert!(settings("http://localhost/").check_plaintext().is_ok());
        assert!(
            settings("https://api.fastmail.com/jmap/session")
                .check_plaintext()
                .is_ok()
        );
        for bad in [
            "http://mail.example.com/jmap",
            // Read by splitting its text, this passed as `localhost`.
            "http://localhost:x@127.0.0.2/jmap",
            "ftp://x",
        ] {
            let e = settings(bad).check_plaintext().unwrap_err();
            assert_eq!(e.error_type(), "validation_error", "{bad}");
        }
        let mut trusting = settings("https://api.example.com/jmap/session");
        trusting.trusted_origins = vec!["https://content.example.com".into()];
        assert!(trusting.check_plaintext().is_ok());
        for bad in [
            "http://content.example.com",
            "https://content.example.com/path",
        ] {
            trusting.trusted_origins = vec![bad.into()];
            assert!(trusting.check_plaintext().is_err(), "{bad}");
        }
    }
}
