//! Drafts through the change request: a reply (or a new message) saved among the account's
//! drafts for the person to edit and send from their own mail client; mailbroker sends
//! nothing. A reply is read from the server first (its Message-ID, References, sender and
//! recipients are the thread's, not the index's summary of them). Journaled like any write:
//! an undo deletes the draft while it is still as saved, else `stale_state`.

use mail_parser::{Addr, HeaderValue, MessageParser};
use mailbroker_core::{
    AccountId, Draft, Error, MailboxInfo, Outcome, PlacedDraft, Recipient, ReplyOf, Result, Role,
    Tally,
};
use mailbroker_store::{Asked, ChangeRecord, Chosen, Store};
use serde::Serialize;

use super::update::ChangeReport;
use crate::scope::Scope;
use crate::sessions::{self, Session};

/// What a person or an assistant asked for.
#[derive(Debug, Clone, Default)]
pub struct DraftRequest {
    /// The account of a new message (a reply's is its original's).
    pub account: Option<AccountId>,
    /// The indexed message this answers.
    pub reply_to: Option<i64>,
    /// Reply to all: the original's other recipients go in Cc.
    pub all: bool,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub subject: Option<String>,
    pub body: String,
    /// Quote the original's text below the body, each line after `> `.
    pub quote: bool,
}

/// The draft a change saved, as reports show it.
#[derive(Debug, Clone, Serialize)]
pub struct SavedDraft {
    pub account: AccountId,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub subject: String,
    pub in_reply_to: Option<String>,
    /// Where it was saved; absent in a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mailbox: Option<String>,
    pub message_id: String,
}

/// The longest quote of the original, in characters: the person's mail client has the rest.
const MAX_QUOTE: usize = 20_000;

/// Builds the draft (reading the original of a reply), then, unless `dry_run`, saves it,
/// journaled.
pub(super) async fn save(
    store: &Store,
    req: DraftRequest,
    scope: &Scope,
    (dry_run, origin): (bool, &str),
) -> Result<ChangeReport> {
    let (account, mut session, draft) = compose(store, &req, scope).await?;
    draft.validate()?;
    let source = draft.source(mailbroker_store::now_secs())?;
    let mut saved = SavedDraft {
        account: account.clone(),
        to: draft.to.iter().map(|r| r.email.clone()).collect(),
        cc: draft.cc.iter().map(|r| r.email.clone()).collect(),
        subject: draft.subject.clone(),
        in_reply_to: draft.in_reply_to.clone(),
        mailbox: None,
        message_id: draft.message_id.clone(),
    };
    let plan = vec![format!(
        "save a draft in account {account}'s drafts, to {}, subject {:?} ({} bytes); nothing is sent",
        saved.to.join(", "),
        saved.subject,
        source.len()
    )];
    if dry_run {
        session.close().await;
        return Ok(ChangeReport {
            dry_run: true,
            planned: 1,
            plan,
            draft: Some(saved),
            ..ChangeReport::default()
        });
    }
    let drafts = drafts_mailbox(store, &account).await?;
    let intent = record(
        origin,
        Chosen::Ids {
            ids: req.reply_to.into_iter().collect(),
        },
        plan.clone(),
    );
    let change_id = store.open_change(&intent).await?;
    let placed = session
        .provider
        .create_draft(&draft, &source, drafts.as_ref())
        .await;
    session.close().await;
    let placed = settle(store, change_id, &account, placed).await?;
    saved.mailbox = Some(placed.mailbox);
    let mut tally = Tally::default();
    tally.add(Outcome::Applied);
    Ok(ChangeReport {
        change_id: Some(change_id),
        plan,
        planned: 1,
        tally,
        draft: Some(saved),
        ..ChangeReport::default()
    })
}

/// Journals what came of saving: the placement, or the intent closed (an error before the
/// server was asked removes it).
async fn settle(
    store: &Store,
    change_id: i64,
    account: &AccountId,
    placed: Result<PlacedDraft>,
) -> Result<PlacedDraft> {
    match placed {
        Ok(placed) => {
            store.record_draft(change_id, account, &placed).await?;
            store.close_change(change_id, &[]).await?;
            Ok(placed)
        }
        Err(e) => {
            match e.error_type() {
                "validation_error" | "unsupported" | "not_found" | "auth_required"
                | "insufficient_scope" => store.discard_change(change_id).await?,
                _ => store.close_change(change_id, &[]).await?,
            }
            Err(e)
        }
    }
}

fn record(origin: &str, selection: Chosen, plan: Vec<String>) -> ChangeRecord {
    ChangeRecord::intent(origin, selection, Asked::Draft { draft: true }, plan)
}

/// The account's drafts mailbox as the index knows it (role `drafts`).
async fn drafts_mailbox(store: &Store, account: &AccountId) -> Result<Option<MailboxInfo>> {
    let mailboxes = store.mailboxes_of(account).await?;
    let Ok((name, Some(Role::Drafts))) = mailboxes.resolve(Role::Drafts.as_str()) else {
        return Ok(None);
    };
    let remote = mailboxes.folder_ids(&[&name]).remove(&name);
    Ok(Some(MailboxInfo {
        name,
        role: Some(Role::Drafts),
        role_source: None,
        delimiter: None,
        selectable: true,
        remote,
    }))
}

/// The draft `req` asks for, with a session on its account (which read the original).
async fn compose(
    store: &Store,
    req: &DraftRequest,
    scope: &Scope,
) -> Result<(AccountId, Session, Draft)> {
    let Some(id) = req.reply_to else {
        let account = req.account.clone().ok_or_else(|| {
            Error::validation("a new draft needs its account")
                .with_next_step("give --account ID, or reply to a message with --reply-to ID")
        })?;
        if !scope.opens(&account) {
            return Err(Error::not_found(format!("no account {account}")));
        }
        let record = store.account(&account).await?;
        let session = sessions::open(store, &account).await?;
        let subject = req.subject.clone().ok_or_else(|| {
            Error::validation("a new draft needs a subject").with_next_step("give --subject TEXT")
        })?;
        let draft = Draft {
            from: own(record.email.as_deref()),
            to: recipients(&req.to)?,
            cc: recipients(&req.cc)?,
            subject,
            body: req.body.clone(),
            message_id: message_id(record.email.as_deref()),
            in_reply_to: None,
            references: Vec::new(),
            reply_of: None,
        };
        return Ok((account, session, draft));
    };
    let row = store
        .message(id)
        .await
        .and_then(|row| match scope.opens(&row.place.account) {
            true => Ok(row),
            false => Err(mailbroker_store::no_message(id)),
        })?;
    let place = row.place;
    let record = store.account(&place.account).await?;
    let mut session = sessions::open(store, &place.account).await?;
    let source = (session.provider)
        .fetch_sources(&place.mailbox, std::slice::from_ref(&place.remote_id))
        .await?
        .into_iter()
        .next()
        .map(|(_, s)| s)
        .ok_or_else(|| {
            Error::stale_state(format!("message {id} is no longer where the index has it"))
                .with_next_step("run: mailbroker sync, then find it again")
        })?;
    let folder = (store.mailboxes_of(&place.account).await?)
        .folder_ids(&[&place.mailbox])
        .remove(&place.mailbox);
    let reply_of = ReplyOf {
        mailbox: place.mailbox.clone(),
        id: place.remote_id.clone(),
        folder,
        all: req.all,
    };
    let draft = reply(&source, req, record.email.as_deref(), reply_of)?;
    Ok((place.account, session, draft))
}

/// The reply to `source`: to its Reply-To or From (and, for all, its To and Cc but the
/// account's own address in Cc), `Re:` its subject, threaded by its Message-ID.
fn reply(
    source: &[u8],
    req: &DraftRequest,
    own_address: Option<&str>,
    of: ReplyOf,
) -> Result<Draft> {
    let original = MessageParser::default()
        .parse(source)
        .ok_or_else(|| Error::provider_unavailable("the server sent a message that is not MIME"))?;
    let answer_to = match original.reply_to() {
        Some(a) => a,
        None => original.from().ok_or_else(|| {
            Error::validation("the message has no sender to reply to")
                .with_next_step("write a new draft with --to")
        })?,
    };
    let mut to = addresses(answer_to.iter());
    to.extend(recipients(&req.to)?);
    let mut cc = recipients(&req.cc)?;
    if req.all {
        let others = (original.to().into_iter().flat_map(|a| a.iter()))
            .chain(original.cc().into_iter().flat_map(|a| a.iter()));
        cc.extend(addresses(others));
    }
    let is_own = |r: &Recipient| own_address.is_some_and(|o| r.email.eq_ignore_ascii_case(o));
    cc.retain(|r| !is_own(r) && !to.iter().any(|t| t.email.eq_ignore_ascii_case(&r.email)));
    dedup(&mut cc);
    dedup(&mut to);
    let parent = original.message_id().map(str::to_string);
    let mut references: Vec<String> = match original.references() {
        HeaderValue::Text(t) => vec![t.to_string()],
        HeaderValue::TextList(list) => list.iter().map(|t| t.to_string()).collect(),
        _ => Vec::new(),
    };
    references.extend(parent.clone());
    let subject = req.subject.clone().unwrap_or_else(|| {
        let s = original.subject().unwrap_or("").trim();
        match s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("re:")) {
            true => s.to_string(),
            false => format!("Re: {s}"),
        }
    });
    let mut body = req.body.clone();
    if req.quote {
        body.push_str(&quote(&original));
    }
    Ok(Draft {
        from: own(own_address),
        to,
        cc,
        subject,
        body,
        message_id: message_id(own_address),
        in_reply_to: parent,
        references,
        reply_of: Some(of),
    })
}

fn quote(original: &mail_parser::Message<'_>) -> String {
    let text = original.body_text(0).unwrap_or_default();
    let text: String = text.chars().take(MAX_QUOTE).collect();
    let who = (original.from().and_then(|a| a.first()))
        .and_then(|a| a.address())
        .unwrap_or("the sender");
    let mut out = format!("\n\n{who} wrote:\n");
    for line in text.lines() {
        out.push_str("> ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn addresses<'a>(list: impl Iterator<Item = &'a Addr<'a>>) -> Vec<Recipient> {
    list.filter_map(|a| Recipient::parse(a.address()?, a.name().map(str::to_string)).ok())
        .collect()
}

fn recipients(typed: &[String]) -> Result<Vec<Recipient>> {
    typed.iter().map(|e| Recipient::parse(e, None)).collect()
}

fn dedup(list: &mut Vec<Recipient>) {
    let mut seen = std::collections::HashSet::new();
    list.retain(|r| seen.insert(r.email.to_ascii_lowercase()));
}

fn own(address: Option<&str>) -> Option<Recipient> {
    address.and_then(|a| Recipient::parse(a, None).ok())
}

/// A new Message-ID: 128 random bits at the account's domain.
fn message_id(own_address: Option<&str>) -> String {
    let mut bytes = [0u8; 16];
    // A clock-based id is still unique enough for a draft if the system's source fails.
    if getrandom::fill(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = now.to_le_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let domain = (own_address.and_then(|a| a.rsplit_once('@')))
        .map(|(_, d)| d)
        .filter(|d| {
            d.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        })
        .unwrap_or("mailbroker.invalid");
    format!("{hex}.draft@{domain}")
}

/// Undoes change `change_id` if it saved a draft: the draft deleted while unchanged. `None`
/// for any other change.
pub(super) async fn undo(
    store: &Store,
    change_id: i64,
    origin: &str,
) -> Result<Option<ChangeReport>> {
    let Some((account, placed)) = store.draft_change(change_id).await? else {
        return Ok(None);
    };
    if let Some(by) = store.change(change_id).await?.undone_by {
        return Err(Error::stale_state(format!(
            "change {change_id} was already undone by change {by}"
        )));
    }
    let plan = vec![format!(
        "delete the draft change {change_id} saved in {:?} of account {account}, if it is unchanged",
        placed.mailbox
    )];
    let intent = record(origin, Chosen::UndoOf { undo_of: change_id }, plan.clone());
    let intent = ChangeRecord {
        patch: Asked::Undo { undo_of: change_id },
        ..intent
    };
    let undo_id = store.open_change(&intent).await?;
    let mut session = sessions::open(store, &account).await?;
    let done = session.provider.remove_draft(&placed).await;
    session.close().await;
    match done {
        Ok(()) => {
            store.mark_applied(undo_id).await?;
            store.close_change(undo_id, &[]).await?;
            let mut tally = Tally::default();
            tally.add(Outcome::Applied);
            Ok(Some(ChangeReport {
                change_id: Some(undo_id),
                plan,
                planned: 1,
                tally,
                ..ChangeReport::default()
            }))
        }
        Err(e) => {
            match e.error_type() {
                "stale_state" | "unsupported" | "auth_required" => {
                    store.discard_change(undo_id).await?
                }
                _ => store.close_change(undo_id, &[]).await?,
            }
            Err(e)
        }
    }
}
