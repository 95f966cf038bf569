//! Changing mail on the server (SPEC §3, §5): the one way in for every surface.
//!
//! A surface turns what it was given into a `ChangeRequest` (a patch, a deletion to stage,
//! an undo) and calls `request` with its own `Confirmation`. `request` checks the request
//! against every account it touches, resolves and plans it once, returns the plan of a dry
//! run, asks the surface when the change needs a person's yes, and runs it. `update` is the
//! write pipeline (check, resolve, plan, journal the intent, send, read back, journal the
//! results); `undo` plans the inverse of a journaled change through it; `delete` stages
//! manifests and runs them (only a person does: `mailbroker delete-staged`, whose
//! `Confirmation` alone may run one).
//!
//! Architecture Invariant: a surface never sequences these steps itself; what differs
//! between surfaces (a terminal prompt, MCP elicitation, a confirm token) lives in its
//! `Confirmation`.

use async_trait::async_trait;
use mailbroker_core::{DeleteMode, Error, Patch, Result};

use crate::sessions::Sessions;
use mailbroker_store::home::Home;
use mailbroker_store::{Manifest, MessageRef, Store};

mod batches;
pub mod delete;
pub mod draft;
mod follow;
pub mod rules;
mod selection;
pub mod undo;
mod update;
pub mod words;

pub use follow::Follow;
pub use selection::Selection;
pub(crate) use update::CheckedRequest;
pub use update::{Blocked, ChangeReport, DEFAULT_CONFIRM_ABOVE, Failure};

/// What to do to which messages.
#[derive(Debug, Clone)]
pub enum Operation {
    /// Change read, flagged, tags and mailbox (patch semantics). `create_missing_tags`:
    /// a tag no touched account knows yet may be created (else `not_found`, so a typo does
    /// not silently become a label).
    Update {
        selection: Selection,
        patch: Patch,
        create_missing_tags: bool,
    },
    /// Stage the messages for deletion in a manifest (at most `limit` of them, itself at
    /// most `delete::MAX_MESSAGES`); nothing is deleted.
    Stage {
        selection: Selection,
        mode: DeleteMode,
        limit: usize,
    },
    /// Revert a journaled change.
    Undo { change: i64 },
    /// Run (or resume) a staged deletion, `batch_size` messages a batch and checkpoint.
    Run {
        manifest: i64,
        batch_size: usize,
        progress: delete::Progress,
    },
    /// Carry out a rule manifest: install or remove a rule on an account's server.
    Rule { manifest: i64 },
    /// Save a draft (a reply or a new message) among an account's drafts; never sent.
    Draft {
        request: draft::DraftRequest,
        scope: crate::scope::Scope,
    },
}

impl Operation {
    /// How its messages were chosen, where a selection chose them.
    pub fn chosen(&self) -> Option<mailbroker_store::Chosen> {
        match self {
            Operation::Update { selection, .. } | Operation::Stage { selection, .. } => {
                Some(selection.recorded())
            }
            Operation::Undo { .. }
            | Operation::Run { .. }
            | Operation::Rule { .. }
            | Operation::Draft { .. } => None,
        }
    }

    /// The operation a patch asks for: a deletion is staged, anything else is an update.
    pub fn of_patch(selection: Selection, patch: Patch, create_missing_tags: bool) -> Result<Self> {
        patch.validate()?;
        Ok(match patch.delete {
            Some(mode) => Operation::Stage {
                selection,
                mode,
                limit: delete::MAX_MESSAGES,
            },
            None => Operation::Update {
                selection,
                patch,
                create_missing_tags,
            },
        })
    }
}

/// A change as a surface asks for it.
#[derive(Debug, Clone)]
pub struct ChangeRequest {
    pub operation: Operation,
    /// Plan only: nothing is staged, journaled or sent.
    pub dry_run: bool,
    /// Who asked, as the journal records it (`cli`, `mcp:<client>`).
    pub origin: String,
    /// Writes over this many messages need a person's yes.
    pub confirm_above: u64,
    /// For an assistant: `confirm_above` is a budget per account over a window, spent by
    /// every write that runs without a yes, so it cannot be split across calls.
    pub budget: Option<Budget>,
    /// How the caller follows it while it runs, and whether a large one runs detached.
    pub follow: Follow,
}

/// Messages per account that may change without a person's yes within a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub messages: u64,
    pub window_secs: i64,
}

/// The default window of an assistant's budget: ten minutes.
pub const DEFAULT_BUDGET_WINDOW_SECS: i64 = 600;

/// What a change would do, as a dry run shows it and a person is asked about.
#[derive(Debug, Clone)]
pub enum Preview {
    Change(Box<ChangeReport>),
    /// A deletion to stage: how many messages, in which mode.
    Staged {
        count: u64,
        mode: DeleteMode,
    },
    /// A staged deletion to run: its manifest, the exact plan of its pending items, and the
    /// accounts among them whose person has not allowed permanent deletions unattended.
    Run {
        manifest: Box<Manifest>,
        plan: Vec<String>,
        attended: Vec<mailbroker_core::AccountId>,
    },
}

/// What a person is asked to confirm: the plan, why it needs a yes, and the messages it
/// touches (empty for an undo, whose change id fixes them).
pub struct Asking<'a> {
    pub preview: &'a Preview,
    pub reason: &'a str,
    pub ids: &'a [i64],
}

/// A surface's answer to `Asking`.
pub enum Confirmed<A> {
    /// Go ahead.
    Yes,
    /// The surface answers the call itself (an MCP client must ask its person first); the
    /// change is neither run nor journaled.
    Answer(A),
}

/// How a surface gets a person's yes. A refusal is an error (`confirmation_required`,
/// `confirmation_declined`), and nothing has been sent or journaled when it comes.
#[async_trait]
pub trait Confirmation: Send {
    /// What the surface answers instead of running the change.
    type Answer: Send;

    /// Whether this surface goes ahead without asking (the CLI's `--yes`): the sessions then
    /// open while the targets are read.
    fn unasked(&self) -> bool {
        false
    }

    /// Whether a person runs staged deletions here (SPEC §5): only the CLI's terminal does;
    /// elsewhere `Operation::Run` is refused before anything is read.
    fn runs_deletions(&self) -> bool {
        false
    }

    async fn confirm(&mut self, asking: Asking<'_>) -> Result<Confirmed<Self::Answer>>;
}

/// How a change request ended.
pub enum Outcome<A> {
    /// A dry run: the plan, why the change would need a yes, and the messages it touches.
    DryRun {
        preview: Preview,
        reason: Option<String>,
        ids: Vec<i64>,
    },
    /// The surface's `Confirmation` answered instead.
    Answered(A),
    /// The deletion was staged.
    Staged(Manifest),
    /// The change ran: its report.
    Done(ChangeReport),
    /// The staged deletion ran: its report, and its manifest as the run left it.
    Ran {
        report: ChangeReport,
        manifest: Box<Manifest>,
    },
    /// The change runs on, detached (its `Follow` said so): follow it, and await its report.
    Running(Running),
}

/// A change running detached from the request that started it.
pub struct Running {
    pub follow: Follow,
    pub done: tokio::task::JoinHandle<Result<ChangeReport>>,
}

impl Running {
    /// Its report, once it has run to its end.
    pub async fn finished(self) -> Result<ChangeReport> {
        self.done
            .await
            .map_err(|e| Error::internal(format!("the change's task: {e}")))?
    }
}

/// Where a change runs: the home (locks, secrets), the index, and the tasks a change runs on,
/// so that a caller that goes away (an MCP client, a stopping `serve`) does not stop a write
/// half sent: it is finished and journaled.
pub struct Context<'a> {
    pub home: &'a Home,
    pub store: &'a Store,
    pub work: &'a tokio_util::task::TaskTracker,
}

/// Checks, plans, confirms and runs `req`. See the module's documentation.
pub async fn request<C: Confirmation>(
    cx: &Context<'_>,
    req: ChangeRequest,
    confirmation: &mut C,
) -> Result<Outcome<C::Answer>> {
    let (dry_run, origin, confirm_above) = (req.dry_run, req.origin, req.confirm_above);
    let budget = req.budget;
    let (resolved, sessions, ids) = match req.operation {
        Operation::Stage {
            selection,
            mode,
            limit,
        } => {
            let (selection, rows) = selection.rows(cx.store).await?;
            let staging = (&selection, &rows[..], mode, limit);
            return stage(cx.store, staging, (dry_run, &origin), confirmation).await;
        }
        Operation::Update {
            selection,
            patch,
            create_missing_tags,
        } => {
            let checked = CheckedRequest::check(cx.store, &selection, &patch).await?;
            if !create_missing_tags {
                checked.require_known_tags(cx.store).await?;
            }
            // Nobody will be asked: the sessions open while the targets are read.
            let sessions = match confirmation.unasked() && !dry_run {
                true => update::open_ahead(cx.store, &checked).await?,
                false => Sessions::new(cx.store),
            };
            let resolved = checked.resolve(cx.store).await?;
            let ids = resolved.ids();
            (resolved, sessions, ids)
        }
        Operation::Run {
            manifest,
            batch_size,
            progress,
        } => {
            if !confirmation.runs_deletions() {
                return Err(only_a_person_runs(manifest));
            }
            let ready = delete::resolve(cx.store, manifest, batch_size).await?;
            return run(cx, ready, (dry_run, progress, &origin), confirmation).await;
        }
        Operation::Rule { manifest } => {
            if !confirmation.runs_deletions() || dry_run {
                return Err(only_a_person_rules(
                    format!("rule manifest {manifest}"),
                    format!("mailbroker rule approve {manifest}"),
                ));
            }
            let report = rules::carry_out(cx.store, manifest, &origin).await?;
            return Ok(Outcome::Done(report));
        }
        Operation::Draft { request, scope } => {
            let report = draft::save(cx.store, request, &scope, (dry_run, &origin)).await?;
            return Ok(Outcome::Done(report));
        }
        Operation::Undo { change } if cx.store.draft_change(change).await?.is_some() => {
            match draft::undo(cx.store, change, &origin).await? {
                Some(report) => return Ok(Outcome::Done(report)),
                None => return Err(Error::internal("a saved draft without its record")),
            }
        }
        // A change of rules is put back as the server had them; only a person does it.
        Operation::Undo { change } if cx.store.rule_change(change).await?.is_some() => {
            if !confirmation.runs_deletions() || dry_run {
                return Err(only_a_person_rules(
                    format!("the undo of change {change}"),
                    format!("mailbroker undo {change}"),
                ));
            }
            match rules::undo(cx.store, change, &origin).await? {
                Some(report) => return Ok(Outcome::Done(report)),
                None => return Err(Error::internal("a change of rules without its record")),
            }
        }
        // The journal fixes which messages an undo touches: the change id binds them.
        Operation::Undo { change } => (
            undo::resolve(cx.store, change).await?,
            Sessions::new(cx.store),
            Vec::new(),
        ),
    };
    let mut reason = resolved.preview().confirmation_reason(confirm_above);
    if let (None, Some(budget)) = (&reason, budget) {
        let asked = resolved.planned_by_account();
        let over = cx
            .store
            .spend_budget(&asked, (budget.messages, budget.window_secs), !dry_run);
        reason = over.await?.map(|over| over_budget(&over, budget));
    }
    if dry_run {
        return Ok(Outcome::DryRun {
            preview: Preview::Change(Box::new(resolved.into_preview())),
            reason,
            ids,
        });
    }
    if let Some(reason) = &reason {
        let preview = Preview::Change(Box::new(resolved.preview().clone()));
        let asking = Asking {
            preview: &preview,
            reason,
            ids: &ids,
        };
        if let Confirmed::Answer(a) = confirmation.confirm(asking).await? {
            return Ok(Outcome::Answered(a));
        }
    }
    let store = cx.store.clone();
    let follow = req.follow;
    let planned: u64 = resolved.planned_by_account().values().sum();
    let detach = follow.detach_above.is_some_and(|above| planned > above);
    let following = follow.clone();
    let ran = cx
        .work
        .spawn(async move { resolved.run(sessions, &store, &origin, &following).await });
    if detach {
        return Ok(Outcome::Running(Running { follow, done: ran }));
    }
    let report = ran
        .await
        .map_err(|e| Error::internal(format!("the change's task: {e}")))??;
    Ok(Outcome::Done(report))
}

/// A change of server rules is a person's to make, where they read it whole (not a dry run).
fn only_a_person_rules(what: String, command: String) -> Error {
    Error::confirmation_required(format!(
        "a change of the server's rules ({what}) is carried out by a person, who reads it first; nothing was changed"
    ))
    .with_next_step(format!("ask the user to run, at a terminal: {command}"))
}

/// Why a write that would cross an assistant's budget needs a yes, in words.
fn over_budget(over: &mailbroker_store::Over, budget: Budget) -> String {
    format!(
        "changes {} message(s) of account {}, where {} changed without confirmation in the \
         last {} minutes already (more than {} in that time)",
        over.asked,
        over.account,
        over.spent,
        budget.window_secs / 60,
        budget.messages
    )
}

/// Stages a deletion of `rows` after the person's yes; a dry run only counts them.
async fn stage<C: Confirmation>(
    store: &Store,
    (selection, rows, mode, limit): (&mailbroker_store::Chosen, &[MessageRef], DeleteMode, usize),
    (dry_run, origin): (bool, &str),
    confirmation: &mut C,
) -> Result<Outcome<C::Answer>> {
    delete::check_size(rows.len(), limit)?;
    let count = rows.len() as u64;
    let preview = Preview::Staged { count, mode };
    let reason = format!("stages {count} message(s) for {} deletion", mode.as_str());
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    if dry_run {
        return Ok(Outcome::DryRun {
            preview,
            reason: Some(reason),
            ids,
        });
    }
    let asking = Asking {
        preview: &preview,
        reason: &reason,
        ids: &ids,
    };
    if let Confirmed::Answer(a) = confirmation.confirm(asking).await? {
        return Ok(Outcome::Answered(a));
    }
    let manifest = delete::stage(store, origin, selection, rows, mode, limit).await?;
    Ok(Outcome::Staged(manifest))
}

/// Why a surface other than the person's terminal cannot run a staged deletion.
fn only_a_person_runs(manifest: i64) -> Error {
    Error::confirmation_required(format!(
        "a staged deletion is run by a person; manifest {manifest} was not run"
    ))
    .with_next_step(format!(
        "ask the user to run: mailbroker delete-staged {manifest}"
    ))
}

/// Runs a staged deletion after the person's yes (nothing pending: nothing is asked); a dry
/// run returns its plan.
async fn run<C: Confirmation>(
    cx: &Context<'_>,
    ready: delete::Ready,
    (dry_run, progress, origin): (bool, delete::Progress, &str),
    confirmation: &mut C,
) -> Result<Outcome<C::Answer>> {
    let reason = ready.reason();
    let preview = Preview::Run {
        manifest: Box::new(ready.manifest.clone()),
        plan: ready.plan.clone(),
        attended: ready.attended.clone(),
    };
    if dry_run {
        return Ok(Outcome::DryRun {
            preview,
            reason: Some(reason),
            ids: Vec::new(),
        });
    }
    if ready.pending() > 0 {
        let asking = Asking {
            preview: &preview,
            reason: &reason,
            ids: &[],
        };
        if let Confirmed::Answer(a) = confirmation.confirm(asking).await? {
            return Ok(Outcome::Answered(a));
        }
    }
    let store = cx.store.clone();
    let origin = origin.to_string();
    let ran = cx
        .work
        .spawn(async move { delete::execute(&store, ready, progress, &origin).await });
    let (report, manifest) = ran
        .await
        .map_err(|e| Error::internal(format!("the deletion's task: {e}")))??;
    Ok(Outcome::Ran {
        report,
        manifest: Box::new(manifest),
    })
}
