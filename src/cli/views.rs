//! What `--json` prints: the CLI's output contract (docs/cli.md, "JSON output"), as MCP has its
//! own in `mcp/views.rs`. Store rows are turned into these at the edge, so the index can
//! change shape without changing what scripts read.

use mailbroker_core::{
    AccountId, Capabilities, DeleteMode, ProviderKind, RemoteId, Role, RoleSource, Version,
};
use serde::Serialize;

use crate::accounts::AccountView;
use crate::listing::{
    AccountRecord, Asked, ChangeRecord, Chosen, Fallback, ItemCounts, ItemStatus, JournalItem,
    Manifest, ManifestItem, ManifestStatus, MessageRow, MessageState,
};

/// One message (`search`, `show`).
#[derive(Serialize)]
pub struct MessageJson<'a> {
    pub id: i64,
    pub account: &'a str,
    pub mailbox: &'a str,
    pub remote_id: &'a RemoteId,
    pub version: &'a Version,
    pub message_id: Option<&'a str>,
    pub from: &'a str,
    pub to: &'a str,
    pub cc: &'a str,
    pub subject: &'a str,
    pub date: Option<&'a str>,
    pub size: u64,
    pub has_attachments: bool,
    pub read: bool,
    pub flagged: bool,
    pub flags: &'a [String],
    pub tags: &'a [String],
    pub snippet: &'a str,
    /// The mailing list it came from (`list:`); null for mail from no list.
    pub list: Option<&'a str>,
    /// Its conversation (`thread:`) and how many indexed messages it has.
    pub thread: Option<&'a str>,
    pub thread_messages: u64,
}

impl<'a> From<&'a MessageRow> for MessageJson<'a> {
    fn from(r: &'a MessageRow) -> Self {
        MessageJson {
            id: r.place.id,
            account: r.place.account.as_str(),
            mailbox: &r.place.mailbox,
            remote_id: &r.place.remote_id,
            version: &r.place.version,
            message_id: r.message_id.as_deref(),
            from: &r.from,
            to: &r.to,
            cc: &r.cc,
            subject: &r.subject,
            date: r.date.as_deref(),
            size: r.size,
            has_attachments: r.has_attachments,
            read: r.place.read,
            flagged: r.place.flagged,
            flags: &r.flags,
            tags: &r.place.tags,
            snippet: &r.snippet,
            list: r.list.as_deref(),
            thread: r.thread.as_deref(),
            thread_messages: r.thread_messages,
        }
    }
}

pub fn messages(rows: &[MessageRow]) -> Vec<MessageJson<'_>> {
    rows.iter().map(MessageJson::from).collect()
}

/// A journaled change (`changes`, `changes ID` with its items).
#[derive(Serialize)]
pub struct ChangeJson<'a> {
    pub id: i64,
    pub created_at: i64,
    pub origin: &'a str,
    pub selection: &'a Chosen,
    pub patch: &'a Asked,
    pub plan: &'a [String],
    pub undo_of: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undone_by: Option<i64>,
    #[serde(flatten)]
    pub tally: mailbroker_core::Tally,
    pub status: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ChangeItemJson<'a>>,
}

#[derive(Serialize)]
pub struct ChangeItemJson<'a> {
    pub message_id: i64,
    pub account: &'a str,
    pub outcome: &'a str,
    pub error_type: Option<&'a str>,
    pub error: Option<&'a str>,
    pub before: StateJson<'a>,
    /// The state the server read back; null while the outcome is unknown.
    pub after: Option<StateJson<'a>>,
    /// For an unknown outcome: what the change asked for (a later read-back that shows it
    /// turns the item `applied`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<StateJson<'a>>,
    /// The fallback route that carried it, when not the account's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<&'a str>,
}

/// A message's place and state before or after a change.
#[derive(Serialize)]
pub struct StateJson<'a> {
    pub mailbox: &'a str,
    pub remote_id: &'a RemoteId,
    pub read: bool,
    pub flagged: bool,
    pub tags: &'a [String],
}

impl<'a> From<&'a MessageState> for StateJson<'a> {
    fn from(s: &'a MessageState) -> Self {
        StateJson {
            mailbox: &s.mailbox,
            remote_id: &s.remote_id,
            read: s.read,
            flagged: s.flagged,
            tags: &s.tags,
        }
    }
}

impl<'a> From<&'a JournalItem> for ChangeItemJson<'a> {
    fn from(i: &'a JournalItem) -> Self {
        let unknown = i.outcome == mailbroker_core::Outcome::Unknown;
        ChangeItemJson {
            message_id: i.message_id,
            account: i.account.as_str(),
            outcome: i.outcome.as_str(),
            error_type: i.error_type.as_deref(),
            error: i.error.as_deref(),
            before: (&i.before).into(),
            after: i.after.as_ref().filter(|_| !unknown).map(StateJson::from),
            asked: i.after.as_ref().filter(|_| unknown).map(StateJson::from),
            route: i.route.as_deref(),
        }
    }
}

impl<'a> From<&'a ChangeRecord> for ChangeJson<'a> {
    fn from(c: &'a ChangeRecord) -> Self {
        ChangeJson {
            id: c.id,
            created_at: c.created_at,
            origin: &c.origin,
            selection: &c.selection,
            patch: &c.patch,
            plan: &c.plan,
            undo_of: c.undo_of,
            undone_by: c.undone_by,
            tally: c.tally,
            status: c.status.as_str(),
            items: c.items.iter().map(ChangeItemJson::from).collect(),
        }
    }
}

/// A staged deletion (`stage-delete`, `delete-staged`, `--show` with its items).
#[derive(Serialize)]
pub struct ManifestJson<'a> {
    pub id: i64,
    pub created_at: i64,
    pub origin: &'a str,
    pub selection: &'a Chosen,
    pub mode: DeleteMode,
    pub summary: &'a mailbroker_core::Summary,
    pub status: ManifestStatus,
    pub updated_at: i64,
    pub executed_at: Option<i64>,
    pub counts: &'a ItemCounts,
    /// The journal's changes that ran it (a resumed run has several), newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ManifestItemJson<'a>>,
}

#[derive(Serialize)]
pub struct ManifestItemJson<'a> {
    pub message_id: i64,
    pub account: &'a str,
    pub mailbox: &'a str,
    pub remote_id: &'a RemoteId,
    pub status: ItemStatus,
    pub error: Option<&'a str>,
}

impl<'a> From<&'a ManifestItem> for ManifestItemJson<'a> {
    fn from(i: &'a ManifestItem) -> Self {
        ManifestItemJson {
            message_id: i.message_id,
            account: i.account.as_str(),
            mailbox: &i.mailbox,
            remote_id: &i.remote_id,
            status: i.status,
            error: i.error.as_deref(),
        }
    }
}

impl<'a> From<&'a Manifest> for ManifestJson<'a> {
    fn from(m: &'a Manifest) -> Self {
        ManifestJson {
            id: m.id,
            created_at: m.created_at,
            origin: &m.origin,
            selection: &m.selection,
            mode: m.mode,
            summary: &m.summary,
            status: m.status,
            updated_at: m.updated_at,
            executed_at: m.executed_at,
            counts: &m.counts,
            runs: Vec::new(),
            items: m.items.iter().map(ManifestItemJson::from).collect(),
        }
    }
}

/// An account (`account list`). Never a secret.
#[derive(Serialize)]
pub struct AccountJson<'a> {
    pub id: &'a AccountId,
    pub provider: ProviderKind,
    pub email: Option<&'a str>,
    pub settings: &'a serde_json::Value,
    pub capabilities: &'a Capabilities,
    pub created_at: i64,
    pub last_sync_at: Option<i64>,
    /// The route used when the account's own is unavailable, if the person chose one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<&'a Fallback>,
    /// Since when `delete-staged --yes` may delete its mail for good unattended.
    pub unattended_deletions_since: Option<i64>,
}

impl<'a> From<&'a AccountRecord> for AccountJson<'a> {
    fn from(a: &'a AccountRecord) -> Self {
        AccountJson {
            id: &a.id,
            provider: a.provider,
            email: a.email.as_deref(),
            settings: &a.settings,
            capabilities: &a.capabilities,
            created_at: a.created_at,
            last_sync_at: a.last_sync_at,
            fallback: a.fallback.as_ref(),
            unattended_deletions_since: a.unattended_deletions_since,
        }
    }
}

/// An account with where its secret rests and its mailboxes (`account add`, `show`,
/// `login`).
#[derive(Serialize)]
pub struct AccountShowJson<'a> {
    #[serde(flatten)]
    pub account: AccountJson<'a>,
    /// `keyring` (the OS keyring) or `index` (the 0600 index).
    pub secret_store: Option<&'static str>,
    pub mailboxes: Vec<MailboxJson<'a>>,
}

#[derive(Serialize)]
pub struct MailboxJson<'a> {
    pub name: &'a str,
    pub role: Option<Role>,
    pub role_source: Option<RoleSource>,
    pub selectable: bool,
    pub messages: i64,
    pub unread: i64,
}

impl<'a> From<&'a AccountView> for AccountShowJson<'a> {
    fn from(v: &'a AccountView) -> Self {
        let mailboxes = v
            .mailboxes
            .iter()
            .map(|m| MailboxJson {
                name: &m.name,
                role: m.role,
                role_source: m.role_source,
                selectable: m.selectable,
                messages: m.messages,
                unread: m.unread,
            })
            .collect();
        AccountShowJson {
            account: (&v.account).into(),
            secret_store: v.secret_store,
            mailboxes,
        }
    }
}
