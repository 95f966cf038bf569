//! Identifiers and message state, parsed once at the edge so signatures never take raw strings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// A short slug the user picks at `account add` (`work`, `home-imap`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AccountId(String);

impl AccountId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for AccountId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && s.starts_with(|c: char| c.is_ascii_alphanumeric());
        if ok {
            Ok(AccountId(s.to_string()))
        } else {
            Err(Error::validation(format!(
                "account id {s:?} must be 1-64 letters, digits, '-' or '_', starting with a letter or digit"
            )))
        }
    }
}

impl TryFrom<String> for AccountId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<AccountId> for String {
    fn from(id: AccountId) -> String {
        id.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A mailbox (folder) name exactly as the server spells it.
pub type MailboxName = String;
/// Declares a newtype over an opaque string: the core stores, compares for equality and hands
/// it back; only the adapter that made it reads what is inside.
macro_rules! opaque {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(s: impl Into<String>) -> $name {
                $name(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Whether the provider said anything (the empty value means "not known").
            pub fn is_known(&self) -> bool {
                !self.0.is_empty()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

opaque!(
    /// A message's identity on its provider, unique within the account's mailbox that holds
    /// it: IMAP `UIDVALIDITY:UID`, a Gmail message id, a Graph immutable id. A different id
    /// is a different message, even where the provider reused a number.
    RemoteId
);

opaque!(
    /// A message's change marker as the provider last reported it: an IMAP modseq, a Gmail
    /// history id, a Graph changeKey. Empty when the provider keeps none.
    Version
);

opaque!(
    /// Where the last sync of one mailbox stopped, in the adapter's own terms (IMAP
    /// UIDVALIDITY, UIDNEXT and HIGHESTMODSEQ; a Gmail history id; a Graph delta link).
    /// Empty means "not known yet": the next sync starts over.
    MailboxCursor
);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Imap,
    Gmail,
    Graph,
    Applescript,
    Jmap,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Imap => "imap",
            ProviderKind::Gmail => "gmail",
            ProviderKind::Graph => "graph",
            ProviderKind::Applescript => "applescript",
            ProviderKind::Jmap => "jmap",
        }
    }
}

impl FromStr for ProviderKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "imap" => Ok(ProviderKind::Imap),
            "gmail" => Ok(ProviderKind::Gmail),
            "graph" => Ok(ProviderKind::Graph),
            "applescript" => Ok(ProviderKind::Applescript),
            "jmap" => Ok(ProviderKind::Jmap),
            other => Err(Error::validation(format!("unknown provider {other:?}"))),
        }
    }
}

/// The meaning of a mailbox, whatever the provider calls it (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Inbox,
    Archive,
    Junk,
    Trash,
    Sent,
    Drafts,
    All,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Inbox,
        Role::Archive,
        Role::Junk,
        Role::Trash,
        Role::Sent,
        Role::Drafts,
        Role::All,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Inbox => "inbox",
            Role::Archive => "archive",
            Role::Junk => "junk",
            Role::Trash => "trash",
            Role::Sent => "sent",
            Role::Drafts => "drafts",
            Role::All => "all",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s))
    }

    /// Whether moving mail here needs a person's yes, however few messages (SPEC §6).
    pub fn needs_confirmation(self) -> bool {
        matches!(self, Role::Junk | Role::Trash)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an account's server can do, detected at `account add` and stored with the account.
/// Provider-specific facts live in `extensions` by their wire names (`MOVE`, `QRESYNC`, a
/// granted OAuth scope), so the core never grows a field per provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub extensions: Vec<String>,
    /// The server accepts new custom tags (IMAP: PERMANENTFLAGS holds `\*`).
    pub custom_tags: bool,
    /// Longest tag the server accepts, when known.
    pub max_tag_len: Option<u32>,
}

impl Capabilities {
    pub fn has(&self, ext: &str) -> bool {
        self.extensions.iter().any(|e| e.eq_ignore_ascii_case(ext))
    }
}

/// Where a mailbox's role came from, so a person can tell a server's word from a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleSource {
    /// The server said so: IMAP SPECIAL-USE or INBOX, a Gmail system label, a Graph
    /// well-known folder.
    Server,
    /// Guessed from a well-known name, where the server marks no roles.
    Name,
}

impl RoleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RoleSource::Server => "server",
            RoleSource::Name => "name",
        }
    }

    pub fn parse(s: &str) -> Option<RoleSource> {
        [RoleSource::Server, RoleSource::Name]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// One mailbox as the server lists it. Its name is as a person reads it (IMAP: unescaped,
/// modified UTF-7 decoded); the adapter encodes it again for the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailboxInfo {
    pub name: MailboxName,
    pub role: Option<Role>,
    /// Where `role` came from (None without a role).
    #[serde(default)]
    pub role_source: Option<RoleSource>,
    pub delimiter: Option<String>,
    /// `false` for containers that hold no messages (IMAP `\Noselect`).
    pub selectable: bool,
    /// The provider's own id for it where its name is not one (a Graph folder id), so a
    /// write finds it without listing the folder tree.
    #[serde(default)]
    pub remote: Option<String>,
}

/// Read/flagged/tag state of one message, normalised, with the provider's raw values kept
/// beside it (IMAP flags and keywords as sent on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageFlags {
    pub read: bool,
    pub flagged: bool,
    pub tags: Vec<String>,
    pub raw: Vec<String>,
}

/// Whether a message date (seconds since the epoch, from a Date header) is a real moment in
/// the era of e-mail: 1970 to 2200. A garbage header that parses to year 10000 is no date,
/// and the server's own received date is used instead.
pub fn plausible_date(secs: i64) -> bool {
    (0..7_258_118_400).contains(&secs)
}

/// The conversation a message belongs to, as its provider can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Conversation {
    /// The server's own thread: a Gmail threadId, a Graph conversationId, a JMAP threadId.
    Server(String),
    /// Read from the message's own headers (IMAP): the Message-ID its conversation began
    /// with (`conversation_root`). Anyone can name a Message-ID in `References`, so the
    /// conversation holds only the messages whose subjects also match once reply and forward
    /// prefixes and list tags are set aside (`conversation_subject`), as Gmail threads them;
    /// a message whose subject does not match starts a conversation of its own.
    Headers(String),
}

/// Everything the index keeps about one server copy of a message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMeta {
    pub id: RemoteId,
    pub version: Version,
    pub flags: MessageFlags,
    pub message_id: Option<String>,
    pub from: String,
    pub to: String,
    pub cc: String,
    pub subject: String,
    /// Seconds since the Unix epoch (the Date header, else the server's arrival time).
    pub date: Option<i64>,
    pub size: u64,
    pub has_attachments: bool,
    /// The first few hundred characters of the text body, for display and search.
    pub snippet: String,
    /// A longer prefix of the text body, indexed for full-text search but not stored.
    pub body_prefix: String,
    /// The conversation it belongs to (`Conversation`). The index keeps a short hash of it
    /// and the account, for `thread:`: a conversation never spans accounts.
    #[serde(default)]
    pub thread: Option<Conversation>,
    /// The mailing list it came from (`list_of`), for `list:`.
    #[serde(default)]
    pub list: Option<String>,
    /// The text (snippet, body prefix, attachments) is still to be fetched: a first pass
    /// brings headers only, so the index is usable sooner, and `SyncSink::fill_text` brings
    /// the rest.
    #[serde(default)]
    pub text_pending: bool,
    /// Its `Authentication-Results` values, in the order it has them, where the provider
    /// reads them: the index keeps the verdict of the account's own server
    /// (`crate::verdicts`), never the headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_results: Vec<String>,
}

/// What a second pass brings for a message whose headers are indexed: its text, for
/// display and full-text search, and whether it has attachments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageText {
    pub id: RemoteId,
    pub has_attachments: bool,
    pub snippet: String,
    pub body_prefix: String,
}

/// How a mailbox was brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Nothing changed on the server since the last sync; no messages were fetched.
    Unchanged,
    /// Every message was fetched (first sync, `--full`, or the server voided its ids).
    Full,
    /// The server listed what changed and what went since the cursor (IMAP QRESYNC, Gmail
    /// history, a Graph delta link).
    Delta,
    /// The server listed what changed since the cursor; what went was found by comparing its
    /// list of ids with the index (IMAP CONDSTORE).
    Modified,
    /// No change log: every message's state was fetched and compared with the index.
    Scan,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids_are_slugs() {
        assert!("work".parse::<AccountId>().is_ok());
        assert!("home_2-imap".parse::<AccountId>().is_ok());
        for bad in ["", "-x", "a b", "x/y", "ü"] {
            let err = bad.parse::<AccountId>().unwrap_err();
            assert_eq!(err.error_type(), "validation_error", "{bad:?}");
        }
    }

    #[test]
    fn roles_parse_case_insensitively() {
        assert_eq!(Role::parse("Trash"), Some(Role::Trash));
        assert_eq!(Role::parse("nope"), None);
    }
}
