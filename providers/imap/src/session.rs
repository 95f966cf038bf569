//! A logged-in IMAP session as a `Provider`: capability detection and mailbox listing.

use async_imap::imap_proto::{AttributeValue, Response, Status};
use async_imap::types::{Capability, Flag};
use async_trait::async_trait;
use futures::TryStreamExt;
use mailbroker_core::{
    Capabilities, DeleteBatch, Error, ItemResult, MailboxInfo, MailboxSyncReport, MessageFlags,
    Provider, RemoteId, Result, SyncRequest, SyncSink, WriteBatch,
};

use crate::connect::{self, COMMAND_TIMEOUT, ImapConfig, Session, imap_error, timed};
use crate::convert;
use crate::ids::Uid;

/// Extensions mailbroker uses, in the order they are reported.
const KNOWN_EXTENSIONS: [&str; 9] = [
    "MOVE",
    "UIDPLUS",
    "CONDSTORE",
    "QRESYNC",
    "SPECIAL-USE",
    "LIST-STATUS",
    "ENABLE",
    "X-GM-EXT-1",
    "IDLE",
];

pub struct ImapProvider {
    pub(crate) session: Session,
    /// How this session was opened: the account's rules are reached on the same host with
    /// the same login (`rules.rs`).
    pub(crate) config: Box<ImapConfig>,
    pub(crate) caps: Capabilities,
    pub(crate) commands: u64,
    pub(crate) qresync_enabled: bool,
    /// Each mailbox's counters as the last sync read them: IDLE compares its own mailbox's
    /// with them to find a change that came after the sync and before the IDLE.
    pub(crate) synced: std::collections::HashMap<String, Counters>,
}

/// A mailbox's counters, from STATUS (no message count) or from SELECT and EXAMINE.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counters {
    uidvalidity: Option<u32>,
    uidnext: Option<u32>,
    highestmodseq: Option<u64>,
    exists: Option<u32>,
}

impl Counters {
    pub(crate) fn of_status(status: &MailboxStatus) -> Counters {
        Counters {
            uidvalidity: Some(status.uidvalidity),
            uidnext: Some(status.uidnext),
            highestmodseq: status.highestmodseq,
            exists: None,
        }
    }

    pub(crate) fn of_selected(selected: &async_imap::types::Mailbox) -> Counters {
        Counters {
            uidvalidity: selected.uid_validity,
            uidnext: selected.uid_next,
            highestmodseq: selected.highest_modseq,
            exists: Some(selected.exists),
        }
    }

    /// Whether the mailbox is as it was, by every counter both readings have: a counter one
    /// of them lacks is no reason to sync again (it would never stop).
    pub(crate) fn unchanged_since(&self, before: &Counters) -> bool {
        fn same<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
            a.zip(b).is_none_or(|(a, b)| a == b)
        }
        same(self.uidvalidity, before.uidvalidity)
            && same(self.uidnext, before.uidnext)
            && same(self.highestmodseq, before.highestmodseq)
            && same(self.exists, before.exists)
    }
}

impl std::fmt::Debug for ImapProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImapProvider")
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl ImapProvider {
    /// Connects, logs in and detects what the server can do.
    pub async fn connect(config: &ImapConfig) -> Result<ImapProvider> {
        let (mut session, login_caps) = connect::open(config).await?;
        tracing::debug!("imap: logged in");
        let mut commands = 1;
        let caps = match login_caps {
            Some(caps) => caps,
            None => {
                commands += 1;
                timed("capability", COMMAND_TIMEOUT, session.capabilities())
                    .await?
                    .map_err(|e| imap_error("capability", e))?
            }
        };
        let extensions: Vec<String> = KNOWN_EXTENSIONS
            .iter()
            .filter(|ext| caps.has_str(ext))
            .filter(|ext| {
                !config
                    .disabled_extensions
                    .iter()
                    .any(|d| d.eq_ignore_ascii_case(ext))
            })
            .map(|ext| ext.to_string())
            .collect();
        let max_tag_len = caps.iter().find_map(|c| match c {
            // Not standard, but some servers advertise it; Dovecot's fixed limit is 50.
            Capability::Atom(a) if a.to_ascii_uppercase().starts_with("KEYWORDLEN=") => {
                a[11..].parse().ok()
            }
            _ => None,
        });
        Ok(ImapProvider {
            session,
            config: Box::new(config.clone()),
            caps: Capabilities {
                extensions,
                custom_tags: false,
                max_tag_len,
            },
            commands,
            qresync_enabled: false,
            synced: std::collections::HashMap::new(),
        })
    }

    /// Turns QRESYNC on for this session (once), for syncs: it changes how the server reports
    /// expunges, which writes do not need.
    pub(crate) async fn enable_qresync(&mut self) -> Result<()> {
        if self.caps.has("QRESYNC") && !self.qresync_enabled {
            self.command("ENABLE QRESYNC", |_| {}).await?;
            self.qresync_enabled = true;
        }
        Ok(())
    }

    /// Empties async-imap's unsolicited channel. It holds at most 100 entries and drops the
    /// rest silently, so it is drained after every command; callers that need its content
    /// (VANISHED, STATUS) read it themselves before calling this.
    pub(crate) fn drain_unsolicited(&mut self) {
        while self.session.unsolicited_responses.try_recv().is_ok() {}
    }

    /// Whether new keywords can be stored, from INBOX's PERMANENTFLAGS. SELECT, not EXAMINE:
    /// a read-only mailbox reports no permanent flags at all.
    pub async fn detect_custom_tags(&mut self) -> Result<bool> {
        self.commands += 1;
        let mailbox = timed("select", COMMAND_TIMEOUT, self.session.select("INBOX"))
            .await?
            .map_err(|e| imap_error("select", e))?;
        self.drain_unsolicited();
        let custom = mailbox.permanent_flags.contains(&Flag::MayCreate);
        self.caps.custom_tags = custom;
        Ok(custom)
    }
}

#[async_trait]
impl Provider for ImapProvider {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn list_mailboxes(&mut self) -> Result<Vec<MailboxInfo>> {
        Ok(self.list_with_status(false).await?.0)
    }

    async fn sync(
        &mut self,
        request: &SyncRequest,
        sink: &mut dyn SyncSink,
    ) -> Result<Vec<MailboxSyncReport>> {
        crate::sync::sync_account(self, request, sink).await
    }

    async fn apply(&mut self, batch: &WriteBatch) -> Result<Vec<ItemResult>> {
        self.apply_batch(batch).await
    }

    async fn delete(&mut self, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
        self.delete_batch(batch).await
    }

    async fn fetch_sources(
        &mut self,
        mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        self.read_sources(mailbox, ids).await
    }

    async fn fetch_part(
        &mut self,
        mailbox: &str,
        id: &RemoteId,
        part: &str,
        _listed: &[mailbroker_core::Attachment],
    ) -> Result<Option<mailbroker_core::FetchedPart>> {
        let read = self.read_part(mailbox, id, part).await?;
        Ok(read.map(mailbroker_core::FetchedPart::Mime))
    }

    async fn watch(
        &mut self,
        mailbox: &str,
        timeout: std::time::Duration,
        stop: std::pin::Pin<&mut (dyn std::future::Future<Output = ()> + Send)>,
    ) -> Result<mailbroker_core::Watched> {
        self.idle(mailbox, timeout, stop).await
    }

    fn commands_sent(&self) -> u64 {
        self.commands
    }

    async fn create_draft(
        &mut self,
        draft: &mailbroker_core::Draft,
        source: &[u8],
        drafts: Option<&MailboxInfo>,
    ) -> Result<mailbroker_core::PlacedDraft> {
        let drafts = drafts.ok_or_else(|| {
            Error::not_found("the account has no Drafts mailbox")
                .with_next_step("make a mailbox named Drafts, run: mailbroker sync, then try again")
        })?;
        self.append_draft(draft, source, drafts).await
    }

    async fn remove_draft(&mut self, placed: &mailbroker_core::PlacedDraft) -> Result<()> {
        self.expunge_draft(placed).await
    }

    async fn rules(
        &mut self,
        _ours: &[mailbroker_core::Rule],
    ) -> Result<Vec<mailbroker_core::ServerRule>> {
        crate::rules::read(&self.config).await
    }

    async fn put_rules(
        &mut self,
        _ours: &[mailbroker_core::Rule],
        rules: &[mailbroker_core::Rule],
    ) -> Result<mailbroker_core::RulesBefore> {
        let mailboxes = self.list_mailboxes().await?;
        let placed = mailbroker_managesieve::account::placed(rules, &mailboxes)?;
        crate::rules::put(&self.config, &placed).await
    }

    async fn restore_rules(
        &mut self,
        before: &mailbroker_core::RulesBefore,
    ) -> Result<mailbroker_core::RulesBefore> {
        crate::rules::restore(&self.config, before).await
    }

    /// Says LOGOUT without waiting for the server's BYE: nothing in its answer matters to us,
    /// and waiting would cost every command a round trip.
    async fn close(&mut self) {
        self.commands += 1;
        let _ = timed(
            "logout",
            COMMAND_TIMEOUT,
            self.session.run_command("LOGOUT"),
        )
        .await;
    }
}

impl ImapProvider {
    /// LIST of every mailbox; with `status`, and where LIST-STATUS exists, the same command
    /// also returns each mailbox's counters (one round trip instead of one STATUS per mailbox).
    /// A server that asks for return options (LIST-EXTENDED, which LIST-STATUS implies) omits
    /// the SPECIAL-USE attributes unless they are asked for too.
    pub(crate) async fn list_with_status(
        &mut self,
        status: bool,
    ) -> Result<(Vec<MailboxInfo>, Vec<(String, MailboxStatus)>)> {
        let special_use = self.caps.has("SPECIAL-USE");
        let extended = self.caps.has("LIST-STATUS");
        let mut returns = Vec::new();
        if extended && special_use {
            returns.push("SPECIAL-USE".to_string());
        }
        if extended && status {
            let modseq = if self.caps.has("CONDSTORE") {
                " HIGHESTMODSEQ"
            } else {
                ""
            };
            returns.push(format!("STATUS (UIDVALIDITY UIDNEXT{modseq})"));
        }
        let pattern = match returns.is_empty() {
            true => "\"*\"".to_string(),
            false => format!("\"*\" RETURN ({})", returns.join(" ")),
        };
        self.drain_unsolicited();
        let rx = self.session.unsolicited_responses.clone();
        self.commands += 1;
        let mut statuses = Vec::new();
        let mut names = Vec::new();
        {
            let mut stream = timed(
                "list",
                COMMAND_TIMEOUT,
                self.session.list(Some(""), Some(&pattern)),
            )
            .await?
            .map_err(|e| imap_error("list", e))?;
            loop {
                let next = timed("list", COMMAND_TIMEOUT, stream.try_next())
                    .await?
                    .map_err(|e| imap_error("list", e))?;
                // STATUS answers arrive through the unsolicited channel between LIST lines;
                // reading them as we go keeps that bounded channel from overflowing.
                while let Ok(resp) = rx.try_recv() {
                    if let Some(s) = MailboxStatus::from_unsolicited(resp) {
                        statuses.push(s);
                    }
                }
                match next {
                    Some(name) => names.push(name),
                    None => break,
                }
            }
        }
        self.drain_unsolicited();
        if names.is_empty() {
            return Err(Error::provider_unavailable(
                "imap list returned no mailboxes (not even INBOX)",
            ));
        }
        Ok((convert::mailboxes_of(&names, special_use), statuses))
    }
}

/// A mailbox's counters from STATUS (or LIST-STATUS).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MailboxStatus {
    pub uidvalidity: u32,
    pub uidnext: u32,
    pub highestmodseq: Option<u64>,
}

impl MailboxStatus {
    fn from_unsolicited(resp: async_imap::types::UnsolicitedResponse) -> Option<(String, Self)> {
        use async_imap::imap_proto::StatusAttribute as A;
        let async_imap::types::UnsolicitedResponse::Status {
            mailbox,
            attributes,
        } = resp
        else {
            return None;
        };
        let mut s = MailboxStatus::default();
        for a in attributes {
            match a {
                A::UidValidity(v) => s.uidvalidity = v,
                A::UidNext(v) => s.uidnext = v,
                A::HighestModSeq(v) => s.highestmodseq = Some(v),
                _ => {}
            }
        }
        Some((convert::name_from_wire(&mailbox), s))
    }
}

impl ImapProvider {
    /// Sends one command and hands every untagged answer to `on_data` until the command's own
    /// tagged answer. Unlike async-imap's streams, which end quietly on a dropped connection
    /// or a NO, this fails: `provider_unavailable` when the connection is gone (a write's
    /// outcome is then unknown), `provider_write_failed` on NO/BAD.
    pub(crate) async fn command(
        &mut self,
        command: &str,
        mut on_data: impl FnMut(&Response<'_>),
    ) -> Result<()> {
        self.pipeline(&[command.to_string()], |_, resp| on_data(resp))
            .await
    }

    /// Sends `commands` back to back, then reads their answers: one round trip instead of one
    /// per command. The server runs them in order, so each sees what the earlier ones did,
    /// and an untagged answer belongs to the first command whose tagged answer has not come
    /// yet; `on_data` gets that command's index. Errors as `command`; a refusal is reported
    /// after every answer has been read, so the session stays in step.
    pub(crate) async fn pipeline(
        &mut self,
        commands: &[String],
        mut on_data: impl FnMut(usize, &Response<'_>),
    ) -> Result<()> {
        let verb: String = commands
            .first()
            .map(|c| {
                c.split_whitespace()
                    .take(if c.starts_with("UID ") { 2 } else { 1 })
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase()
            })
            .unwrap_or_default();
        self.drain_unsolicited();
        let mut tags = Vec::with_capacity(commands.len());
        for command in commands {
            self.commands += 1;
            let id = timed(&verb, COMMAND_TIMEOUT, self.session.run_command(command))
                .await?
                .map_err(|e| imap_error(&verb, e))?;
            tags.push(id);
        }
        let mut current = 0;
        let mut refused = None;
        while current < tags.len() {
            let resp = timed(&verb, COMMAND_TIMEOUT, self.session.read_response())
                .await?
                .map_err(|e| Error::provider_unavailable(format!("imap {verb}: {e}")))?
                .ok_or_else(|| {
                    Error::provider_unavailable(format!("imap {verb}: connection lost"))
                })?;
            let parsed = resp.parsed();
            on_data(current, parsed);
            if let Response::Done {
                tag,
                status,
                outcome,
            } = parsed
                && *tag == tags[current]
            {
                if *status != Status::Ok {
                    refused.get_or_insert_with(|| {
                        Error::provider_write_failed(format!(
                            "imap {verb} refused: {}",
                            outcome.information.as_deref().unwrap_or("")
                        ))
                    });
                }
                current += 1;
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// Runs a FETCH of flags, collecting (uid, modseq, flags) and any VANISHED UIDs.
    pub(crate) async fn fetch_flags(
        &mut self,
        command: &str,
        out: &mut Vec<(Uid, u64, MessageFlags)>,
        vanished: &mut Vec<Uid>,
    ) -> Result<()> {
        self.command(command, |resp| collect_flags(resp, out, vanished))
            .await
    }
}

/// A message as `glimpse` sees it: UID, modseq, flags and Message-ID, without its headers
/// and text.
pub(crate) type Glimpse = (Uid, u64, MessageFlags, Option<String>, Option<u64>);

impl ImapProvider {
    /// A glimpse of each message of `set` (a UID set or range) in the selected mailbox.
    pub(crate) async fn glimpse(&mut self, set: &str) -> Result<Vec<Glimpse>> {
        let modseq = if self.caps.has("CONDSTORE") {
            " MODSEQ"
        } else {
            ""
        };
        let command = format!(
            "UID FETCH {set} (UID FLAGS{modseq} RFC822.SIZE BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])"
        );
        let mut out = Vec::new();
        self.command(&command, |resp| {
            let mut flags = Vec::new();
            collect_flags(resp, &mut flags, &mut Vec::new());
            if let (Some((uid, modseq, flags)), Response::Fetch(_, attrs)) = (flags.pop(), resp) {
                let id = attrs.iter().find_map(|a| match a {
                    AttributeValue::BodySection {
                        data: Some(data), ..
                    } => convert::message_id_of(data),
                    _ => None,
                });
                let size = attrs.iter().find_map(|a| match a {
                    AttributeValue::Rfc822Size(n) => Some(u64::from(*n)),
                    _ => None,
                });
                out.push((uid, modseq, flags, id, size));
            }
        })
        .await?;
        Ok(out)
    }
}

/// Takes (uid, modseq, flags) from a FETCH answer and UIDs from a VANISHED one.
pub(crate) fn collect_flags(
    resp: &Response<'_>,
    out: &mut Vec<(Uid, u64, MessageFlags)>,
    vanished: &mut Vec<Uid>,
) {
    match resp {
        Response::Fetch(_, attrs) => {
            let mut uid = None;
            let mut modseq = 0;
            let mut flags = Vec::new();
            for attr in attrs {
                match attr {
                    AttributeValue::Uid(u) => uid = Some(Uid::from(*u)),
                    AttributeValue::ModSeq(m) => modseq = *m,
                    AttributeValue::Flags(f) => {
                        // Borrowed from the answer: `flags_of` makes the one copy kept.
                        flags = f.iter().map(|s| Flag::from(s.as_ref())).collect();
                    }
                    _ => {}
                }
            }
            if let Some(uid) = uid {
                out.push((uid, modseq, convert::flags_of(flags.into_iter())));
            }
        }
        Response::Vanished { uids, .. } => {
            for range in uids {
                vanished.extend(range.clone().map(Uid::from));
            }
        }
        _ => {}
    }
}
