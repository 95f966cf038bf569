//! A session with Mail.app: mailboxes, a metadata sync, and writes verified by reading each
//! message back, all through generated scripts (`script.rs`) run one at a time (`runner.rs`).
//!
//! Ids: on an AppleScript account the index holds Mail's own message `id` (`Ids::Mail`); as a
//! fallback for another provider's account it holds that provider's ids, which Mail does not
//! know (`Ids::Foreign`), so messages are found by Message-ID only, and a moved message keeps
//! the id the index has until the account's own route syncs again.

use mailbroker_core::path::{SEPARATOR, child_path};
use mailbroker_core::{
    Capabilities, DeleteBatch, DeleteMode, Error, ItemResult, MailboxInfo, MailboxSyncReport,
    MessageFlags, Outcome, Provider, RemoteId, Result, Role, RoleSource, SyncRequest, SyncSink,
    Version, WriteBatch, WriteTarget,
};
use serde_json::Value;

use crate::runner::{Kind, Runner};
use crate::script::{self, Change, Target};

/// Messages per script: Mail answers a longer one slowly enough to hit its timeout.
pub const PER_SCRIPT: usize = 50;
/// Messages per metadata page of a sync.
pub(crate) const PAGE: u64 = 500;
/// A script's per-message answer when the message found by id carries another Message-ID.
const IDENTITY_CHANGED: i64 = 4001;
/// The script's error number for a Message-ID that several messages there carry.
const SHARED_MESSAGE_ID: i64 = 4002;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    Mail,
    Foreign,
}

pub struct MailApp {
    runner: Runner,
    account: String,
    ids: Ids,
    capabilities: Capabilities,
    listing: Option<Listing>,
}

/// What the mailboxes script answered.
#[derive(Debug, Clone)]
struct Listing {
    mailboxes: Vec<(String, u64, Option<i64>)>,
    junk: Option<String>,
    trash: Option<String>,
}

impl MailApp {
    pub fn new(runner: Runner, account: &str, ids: Ids) -> MailApp {
        MailApp {
            runner,
            account: account.to_string(),
            ids,
            capabilities: Capabilities::default(),
            listing: None,
        }
    }

    async fn listing(&mut self) -> Result<Listing> {
        if let Some(l) = &self.listing {
            return Ok(l.clone());
        }
        let script = script::mailboxes(&self.account, self.runner.timeout_secs);
        let answer = self.runner.run(&script, Kind::Read).await?;
        let mailboxes = answer["mailboxes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| {
                let path = path_of(&b["path"])?;
                Some((path, b["count"].as_u64().unwrap_or(0), b["newest"].as_i64()))
            })
            .collect();
        let listing = Listing {
            mailboxes,
            junk: path_of(&answer["junk"]),
            trash: path_of(&answer["trash"]),
        };
        self.listing = Some(listing.clone());
        Ok(listing)
    }

    fn target(&self, t: &WriteTarget) -> Target {
        Target {
            mail_id: (self.ids == Ids::Mail).then(|| t.id.as_str().to_string()),
            // Mail's `message id` has no angle brackets; some providers' ids do.
            message_id: t
                .message_id
                .as_deref()
                .map(|m| m.trim_start_matches('<').trim_end_matches('>').to_string()),
        }
    }

    /// Runs `make` for each script's share of `targets` and returns the per-message answers,
    /// in order; a script that failed as a whole marks its share with its error.
    async fn each_script(
        &self,
        targets: &[WriteTarget],
        make: impl Fn(&[Target]) -> String,
    ) -> Vec<std::result::Result<Value, Error>> {
        let mut out = Vec::with_capacity(targets.len());
        for chunk in targets.chunks(PER_SCRIPT) {
            let list: Vec<Target> = chunk.iter().map(|t| self.target(t)).collect();
            match self.runner.run(&make(&list), Kind::Write).await {
                Ok(answer) => {
                    let results = answer["results"].as_array().cloned().unwrap_or_default();
                    let mut results = results.into_iter();
                    for _ in chunk {
                        out.push(results.next().ok_or_else(|| {
                            Error::outcome_unknown("Mail.app's answer left this message out")
                        }));
                    }
                }
                Err(e) => out.extend(chunk.iter().map(|_| Err(e.clone()))),
            }
        }
        out
    }

    /// Each target's result from its answer (`judge`); one applied where `to` sent it has
    /// moved there, under the id it has now.
    fn results(
        &self,
        targets: &[WriteTarget],
        answers: Vec<std::result::Result<Value, Error>>,
        holds: impl Fn(bool, bool, &str) -> bool + Copy,
        (gone, to): (Outcome, Option<&str>),
    ) -> Vec<ItemResult> {
        targets
            .iter()
            .zip(answers)
            .map(|(t, answer)| {
                let id_after = answer.as_ref().ok().map(|a| self.id_after(t, a));
                let mut r = judge(t, answer, holds, gone);
                if let (Some(to), Outcome::Applied, Some(id)) = (to, r.outcome, id_after) {
                    r.moved_to = Some((to.to_string(), id));
                }
                r
            })
            .collect()
    }

    /// The id a message has after it moved: Mail's new one, or the one the index holds.
    fn id_after(&self, t: &WriteTarget, answer: &Value) -> RemoteId {
        match (self.ids, answer["mail_id"].as_str()) {
            (Ids::Mail, Some(id)) if !id.is_empty() => RemoteId::new(id),
            _ => t.id.clone(),
        }
    }
}

/// Mail keeps no change counter: a message's version is its status.
pub(crate) fn version_of(read: bool, flagged: bool) -> Version {
    Version::new(format!("r{}f{}", u8::from(read), u8::from(flagged)))
}

fn role_of(path: &str, listing: &Listing) -> Option<(Role, RoleSource)> {
    if listing.junk.as_deref() == Some(path) {
        return Some((Role::Junk, RoleSource::Server));
    }
    if listing.trash.as_deref() == Some(path) {
        return Some((Role::Trash, RoleSource::Server));
    }
    let role = match path.to_ascii_lowercase().as_str() {
        "inbox" => return Some((Role::Inbox, RoleSource::Server)),
        "archive" => Role::Archive,
        "sent" | "sent messages" | "sent items" => Role::Sent,
        "drafts" => Role::Drafts,
        _ => return None,
    };
    Some((role, RoleSource::Name))
}

/// A per-message answer in our terms, for a message whose change `holds` (given its read
/// and flagged status and mailbox) or not.
fn judge(
    t: &WriteTarget,
    answer: std::result::Result<Value, Error>,
    holds: impl Fn(bool, bool, &str) -> bool,
    gone: Outcome,
) -> ItemResult {
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            let outcome = match e.is_unknown_outcome() {
                true => Outcome::Unknown,
                false => Outcome::Failed,
            };
            return ItemResult::new(t.id.clone(), outcome).with_error(e);
        }
    };
    let error = answer["error"].as_str().unwrap_or("no reason given");
    if answer["lost"].as_bool() == Some(true) {
        return ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
            Error::verification_failed(format!(
                "Mail.app reported success, but the message is {error}"
            ))
            .with_next_step("look for the message in Mail.app, then run: mailbroker sync"),
        );
    }
    if answer["unknown"].as_bool() == Some(true) {
        return ItemResult::new(t.id.clone(), Outcome::Unknown).with_error(
            Error::outcome_unknown(format!(
                "Mail.app did it, but cannot show which message it is: {error}"
            ))
            .with_next_step("run: mailbroker sync, then look at the messages in Mail.app"),
        );
    }
    if answer["found"].as_bool() != Some(true) {
        return match answer["number"].as_i64() {
            Some(SHARED_MESSAGE_ID) => ItemResult::new(t.id.clone(), Outcome::Stale).with_error(
                Error::stale_state(format!(
                    "which message this is cannot be told ({error}); left alone"
                ))
                .with_next_step("run: mailbroker sync, then look at the messages in Mail.app"),
            ),
            Some(-1728) if gone == Outcome::Unchanged => ItemResult::new(t.id.clone(), gone),
            Some(-1728) | Some(IDENTITY_CHANGED) => ItemResult::new(t.id.clone(), Outcome::Stale)
                .with_error(
                    Error::stale_state(format!("not the message the index has, or gone: {error}"))
                        .with_next_step("run: mailbroker sync"),
                ),
            _ => ItemResult::new(t.id.clone(), Outcome::Failed)
                .with_error(Error::provider_write_failed(format!("Mail.app: {error}"))),
        };
    }
    let read = answer["read"].as_bool().unwrap_or(false);
    let flagged = answer["flagged"].as_bool().unwrap_or(false);
    let mailbox = path_of(&answer["mailbox"]).unwrap_or_default();
    let mailbox = mailbox.as_str();
    if !holds(read, flagged, mailbox) {
        return ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
            Error::verification_failed(format!(
                "Mail.app reported success, but the message reads back read={read}, flagged={flagged}, in {mailbox:?}"
            ))
            .with_next_step("look at the message in Mail.app, then run: mailbroker sync"),
        );
    }
    let flags = MessageFlags {
        read,
        flagged,
        ..t.flags.clone()
    };
    ItemResult {
        observed: Some((version_of(read, flagged), flags)),
        ..ItemResult::new(t.id.clone(), Outcome::Applied)
    }
}

/// Our path of a mailbox Mail names by the names along it (`["Clients", "Acme"]`): a name
/// may hold a slash, so the path is made by `mailbroker_core::path`.
fn path_of(names: &Value) -> Option<String> {
    let mut path: Option<String> = None;
    for name in names.as_array()? {
        path = Some(child_path(path.as_deref(), name.as_str()?));
    }
    path
}

/// Mail's names and ours for the same mailbox (`INBOX`, `Inbox`).
fn same_mailbox(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

#[async_trait::async_trait]
impl Provider for MailApp {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        let listing = self.listing().await?;
        Ok(listing
            .mailboxes
            .iter()
            .map(|(path, _, _)| {
                let role = role_of(path, &listing);
                MailboxInfo {
                    name: path.clone(),
                    role: role.map(|r| r.0),
                    role_source: role.map(|r| r.1),
                    delimiter: Some(SEPARATOR.to_string()),
                    selectable: true,
                    remote: None,
                }
            })
            .collect())
    }

    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        crate::sync::sync(self, request, sink).await
    }

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        if !batch.op.add_tags.is_empty() || !batch.op.remove_tags.is_empty() {
            return Err(crate::adapter::no_tags());
        }
        let change = Change {
            read: batch.op.read,
            flagged: batch.op.flagged,
            move_to: batch.move_to.clone(),
        };
        let (account, mailbox, timeout) = (&self.account, &batch.mailbox, self.runner.timeout_secs);
        let answers = self
            .each_script(&batch.targets, |list| {
                script::apply(account, mailbox, list, &change, timeout)
            })
            .await;
        let expected = batch.move_to.as_deref().unwrap_or(&batch.mailbox);
        let holds = |read: bool, flagged: bool, in_box: &str| {
            batch.op.read.is_none_or(|r| r == read)
                && batch.op.flagged.is_none_or(|f| f == flagged)
                && same_mailbox(in_box, expected)
        };
        Ok(self.results(
            &batch.targets,
            answers,
            holds,
            (Outcome::Stale, batch.move_to.as_deref()),
        ))
    }

    /// Each message's source, found by Mail's id (an AppleScript account's own ids only).
    async fn fetch_sources(
        &mut self,
        mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        if self.ids != Ids::Mail {
            return Err(Error::unsupported(
                "Mail.app cannot find this account's messages by their ids",
            ));
        }
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(PER_SCRIPT) {
            let list: Vec<Target> = (chunk.iter())
                .map(|id| Target {
                    mail_id: Some(id.as_str().to_string()),
                    message_id: None,
                })
                .collect();
            let script = script::sources(&self.account, mailbox, &list, self.runner.timeout_secs);
            let answer = self.runner.run(&script, Kind::Read).await?;
            for found in answer["results"].as_array().into_iter().flatten() {
                if let (Some(id), Some(source)) =
                    (found["mail_id"].as_str(), found["source"].as_str())
                {
                    out.push((RemoteId::new(id), source.as_bytes().to_vec()));
                }
            }
        }
        Ok(out)
    }

    async fn create_draft(
        &mut self,
        draft: &mailbroker_core::Draft,
        _source: &[u8],
        drafts: Option<&MailboxInfo>,
    ) -> Result<mailbroker_core::PlacedDraft> {
        self.save_draft(draft, drafts).await
    }

    async fn remove_draft(&mut self, placed: &mailbroker_core::PlacedDraft) -> Result<()> {
        self.remove_saved_draft(placed).await
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        if batch.mode == DeleteMode::Permanent {
            return Err(crate::adapter::no_permanent());
        }
        let trash = match batch.trash.clone().or(self.listing().await?.trash) {
            Some(t) => t,
            None => {
                return Err(
                    Error::not_found("Mail.app shows no trash mailbox for this account")
                        .with_next_step("open the account in Mail.app, then run: mailbroker sync"),
                );
            }
        };
        let (account, mailbox, timeout) = (&self.account, &batch.mailbox, self.runner.timeout_secs);
        let answers = self
            .each_script(&batch.targets, |list| {
                script::delete(account, mailbox, list, timeout)
            })
            .await;
        let holds = |_: bool, _: bool, in_box: &str| same_mailbox(in_box, &trash);
        Ok(self.results(
            &batch.targets,
            answers,
            holds,
            (Outcome::Unchanged, Some(&trash)),
        ))
    }
}

impl MailApp {
    pub(crate) fn account(&self) -> &str {
        &self.account
    }

    pub(crate) fn runner(&self) -> &Runner {
        &self.runner
    }

    pub(crate) fn ids(&self) -> Ids {
        self.ids
    }

    /// Each mailbox's path, message count and newest arrival.
    pub(crate) async fn counts(&mut self) -> Result<Vec<(String, u64, Option<i64>)>> {
        Ok(self.listing().await?.mailboxes)
    }

    /// Metadata of messages `first..=last` of `mailbox`, and how many it holds now.
    pub(crate) async fn page(&self, mailbox: &str, first: u64) -> Result<(u64, Vec<Value>)> {
        let last = first + PAGE - 1;
        let script = script::messages(
            &self.account,
            mailbox,
            first,
            last,
            self.runner.timeout_secs,
        );
        let answer = self.runner.run(&script, Kind::Read).await?;
        let total = answer["total"].as_u64().unwrap_or(0);
        Ok((
            total,
            answer["messages"].as_array().cloned().unwrap_or_default(),
        ))
    }
}
