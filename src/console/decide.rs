//! What a person decides in the console, once their passkey answered for exactly that
//! decision (`passkeys.rs`): approve or decline an assistant's waiting write, run or cancel
//! a staged deletion, undo a change. Changes go through the one pipeline,
//! `change::request`, with the console as the `Confirmation`.

use async_trait::async_trait;
use mailbroker_core::{Error, Result};

use super::Console;
use crate::change::{self, Asking, ChangeRequest, Confirmation, Confirmed, Operation, Outcome};
use crate::listing::{Decision, Listing};
use crate::scope::Scope;

/// A decision, as a page's button names it (`approve:TOKEN`, `run:ID`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Lets an assistant's write that waits on a confirm token run once.
    Approve(String),
    /// Refuses it: the write never runs.
    Decline(String),
    /// Runs a staged deletion, in the mode it was staged in.
    Run(i64),
    /// Cancels a staged deletion.
    Cancel(i64),
    /// Undoes a change.
    Undo(i64),
    /// Carries out a rule manifest on its account's server (then its backfill).
    Rule(i64),
    /// Cancels a rule manifest.
    DropRule(i64),
    /// Lets a person approve at a terminal again, where only a passkey did
    /// (`approvals:person`): loosening needs the passkey, as a terminal can be faked.
    TerminalsApprove,
    /// Allows a hosted assistant's client what the person chose (OAuth consent).
    Grant(super::grant::Choice),
    /// Denies a client's request for the person's mail.
    DenyGrant(String),
    /// Ends what a client was granted (`oauth-N`), and its tokens.
    RevokeGrant(i64),
}

impl Action {
    pub fn parse(text: &str) -> Result<Action> {
        let bad = || Error::validation(format!("{text:?} is not something the console does"));
        let (verb, what) = text.split_once(':').ok_or_else(bad)?;
        let token = || match !what.is_empty() && what.bytes().all(|b| b.is_ascii_hexdigit()) {
            true => Ok(what.to_string()),
            false => Err(bad()),
        };
        let id = || what.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(bad);
        match verb {
            "approve" => Ok(Action::Approve(token()?)),
            "decline" => Ok(Action::Decline(token()?)),
            "run" => Ok(Action::Run(id()?)),
            "cancel" => Ok(Action::Cancel(id()?)),
            "rule" => Ok(Action::Rule(id()?)),
            "drop-rule" => Ok(Action::DropRule(id()?)),
            "undo" => Ok(Action::Undo(id()?)),
            "approvals" if what == "person" => Ok(Action::TerminalsApprove),
            "grant" => super::grant::Choice::parse(what)
                .map(Action::Grant)
                .ok_or_else(|| bad().with_next_step("choose at least one account")),
            "deny-grant" => Ok(Action::DenyGrant(token()?)),
            "revoke-grant" => Ok(Action::RevokeGrant(id()?)),
            _ => Err(bad()),
        }
    }

    /// Refuses, before the passkey is asked, what has nothing left to decide: a write no
    /// longer waiting, a staged deletion with nothing to run. (Doing it checks again.)
    pub async fn applies(&self, c: &Console) -> Result<()> {
        let listing = Listing::new(&c.store, &Scope::Owner);
        let stale = |what: String| {
            Error::validation(format!("{what}: there is nothing left to decide"))
                .with_next_step("reload the page")
        };
        match self {
            Action::Approve(token) | Action::Decline(token) => {
                let decision = c.store.approval(token).await?.decision();
                match decision {
                    Decision::Waiting => Ok(()),
                    other => Err(stale(format!("this request is {}", other.as_str()))),
                }
            }
            Action::Run(id) | Action::Cancel(id) => {
                let status = listing.manifest(*id, false).await?.status;
                match status.runnable() {
                    true => Ok(()),
                    false => Err(stale(format!("staged deletion {id} is {status}"))),
                }
            }
            Action::Undo(id) => listing.change(*id).await.map(drop),
            Action::Rule(id) | Action::DropRule(id) => {
                let m = c.store.rule_manifest(*id).await?;
                match m.status == crate::store::RuleStatus::Pending {
                    true => Ok(()),
                    false => Err(stale(format!("rule manifest {id} is no longer pending"))),
                }
            }
            Action::TerminalsApprove => Ok(()),
            Action::Grant(choice) => super::grant::applies(c, &choice.request).await,
            Action::DenyGrant(id) => super::grant::applies(c, id).await,
            Action::RevokeGrant(id) => {
                match c.store.grants().await?.iter().any(|(g, _)| g.id == *id) {
                    true => Ok(()),
                    false => Err(stale(format!("oauth-{id} is not a live grant"))),
                }
            }
        }
    }

    /// Does it (the passkey was checked) and says how it went, and where to follow it.
    pub async fn run(&self, c: &Console) -> Result<Done> {
        let said = |message: String| Done {
            message,
            location: None,
        };
        match self {
            Action::Approve(token) => {
                (c.store)
                    .approve(token, crate::store::ApprovedBy::Passkey)
                    .await?;
                Ok(said(
                    "approved: the assistant's write may now run, once".into(),
                ))
            }
            Action::Decline(token) => {
                c.store.decline(token).await?;
                Ok(said("declined: that write will not run".into()))
            }
            Action::Cancel(id) => {
                change::delete::cancel(&c.store, *id).await?;
                Ok(said(format!("staged deletion {id} cancelled")))
            }
            Action::Run(id) => start_run(c, *id).await,
            Action::Rule(id) => Ok(said(rule(c, *id).await?)),
            Action::DropRule(id) => {
                (c.store)
                    .settle_rule(*id, crate::store::RuleStatus::Cancelled, None)
                    .await?;
                Ok(said(format!("rule manifest {id} cancelled")))
            }
            Action::TerminalsApprove => {
                crate::approvals::Approvals::set(&c.store, false, &c.origin.url).await?;
                Ok(said(
                    "a person may approve at a terminal again, or here, or in their client".into(),
                ))
            }
            Action::Undo(id) => Ok(said(done(
                change_by_person(c, Operation::Undo { change: *id }).await?,
            )?)),
            Action::Grant(choice) => super::grant::allow(c, choice).await,
            Action::DenyGrant(id) => super::grant::deny(c, id).await,
            Action::RevokeGrant(id) => super::grant::revoke(c, *id).await,
        }
    }
}

/// What a decision came to: a line for the page, and the page that follows it, if any.
pub struct Done {
    pub message: String,
    pub location: Option<String>,
}

/// Starts staged deletion `id`'s run on the console's own tasks, so that it goes on however
/// long it takes and whatever the browser does; its page shows its progress, then its report.
async fn start_run(c: &Console, id: i64) -> Result<Done> {
    let manifest = Listing::new(&c.store, &Scope::Owner)
        .manifest(id, false)
        .await?;
    if !manifest.status.runnable() {
        return Err(Error::validation(format!(
            "staged deletion {id} is {}: there is nothing to run",
            manifest.status
        ))
        .with_next_step(format!("see its page: /console/deletions/{id}")));
    }
    if !c.running.start(id) {
        return Err(Error::validation(format!(
            "staged deletion {id} is running already"
        )));
    }
    let console = c.clone();
    c.work.spawn(async move {
        let operation = Operation::Run {
            manifest: id,
            batch_size: change::delete::DEFAULT_BATCH,
            progress: change::delete::Progress::new(|_, _| {}),
        };
        // The page reads the run's end from the index: the manifest and its journaled run.
        if let Err(e) = change_by_person(&console, operation).await {
            tracing::warn!("staged deletion {id}: {}", e.message());
        }
        console.running.end(id);
    });
    Ok(Done {
        message: format!("staged deletion {id} is running"),
        location: Some(format!("/console/deletions/{id}")),
    })
}

/// Carries out rule manifest `id` and, when it asks for one, its backfill: each a change of
/// its own in the journal.
async fn rule(c: &Console, id: i64) -> Result<String> {
    let m = c.store.rule_manifest(id).await?;
    let mut line = done(change_by_person(c, Operation::Rule { manifest: id }).await?)?;
    if m.backfill {
        let query = format!("account:{} ({})", m.account, m.rule.query);
        let selection = change::Selection::of(&[], Some(&query))?;
        let operation = Operation::of_patch(selection, m.rule.then, true)?;
        line = format!(
            "{line}; backfill: {}",
            done(change_by_person(c, operation).await?)?
        );
    }
    Ok(format!("rule {:?} carried out: {line}", m.rule.name))
}

/// The console's person: their passkey answered for this very change, so it goes ahead,
/// staged deletions included (a person runs them here, as at a terminal).
struct ByPasskey;

#[async_trait]
impl Confirmation for ByPasskey {
    type Answer = std::convert::Infallible;

    fn unasked(&self) -> bool {
        true
    }

    fn runs_deletions(&self) -> bool {
        true
    }

    async fn confirm(&mut self, _: Asking<'_>) -> Result<Confirmed<Self::Answer>> {
        Ok(Confirmed::Yes)
    }
}

async fn change_by_person(
    c: &Console,
    operation: Operation,
) -> Result<Outcome<std::convert::Infallible>> {
    let cx = change::Context {
        home: &c.home,
        store: &c.store,
        work: &c.work,
    };
    let request = ChangeRequest {
        operation,
        dry_run: false,
        origin: "console".into(),
        confirm_above: change::DEFAULT_CONFIRM_ABOVE,
        budget: None,
        follow: change::Follow::default(),
    };
    change::request(&cx, request, &mut ByPasskey).await
}

/// A change's outcome in a line: its journal id and how its messages ended.
fn done(outcome: Outcome<std::convert::Infallible>) -> Result<String> {
    let (report, manifest) = match outcome {
        Outcome::Done(report) => (report, None),
        Outcome::Ran { report, manifest } => (report, Some(manifest)),
        _ => {
            return Err(Error::internal(
                "the console's change ended without running",
            ));
        }
    };
    let counts: Vec<String> = (report.tally.counts())
        .filter(|(_, n)| *n > 0)
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    let change = report
        .change_id
        .map_or("nothing needed changing".to_string(), |id| {
            format!("change {id}")
        });
    let head = match manifest {
        Some(m) => format!("staged deletion {}: {} — ", m.id, m.status),
        None => String::new(),
    };
    Ok(format!("{head}{change}: {}", counts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_names_a_verb_and_what_it_is_for() {
        assert_eq!(
            Action::parse("approve:ab12").unwrap(),
            Action::Approve("ab12".into())
        );
        assert_eq!(Action::parse("run:12").unwrap(), Action::Run(12));
        assert_eq!(Action::parse("undo:3").unwrap(), Action::Undo(3));
        assert_eq!(
            Action::parse("approvals:person").unwrap(),
            Action::TerminalsApprove
        );
        for bad in [
            "approve",
            "approve:",
            "send:ab",
            "approve:a b",
            "approve:x'",
            "run:-1",
            "run:ab",
            "undo:0",
            "approvals:passkey",
        ] {
            assert!(Action::parse(bad).is_err(), "{bad}");
        }
    }
}
