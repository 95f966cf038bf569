//! `mailbroker update`: the person's side of the write pipeline, and how a change report is
//! printed (for `undo` too).

use std::convert::Infallible;

use async_trait::async_trait;
use mailbroker_core::{Error, Result};

use super::UpdateArgs;
use crate::change::{
    self, Asking, ChangeRequest, Confirmation, Confirmed, Operation, Outcome, Preview, Selection,
};
use crate::home::Home;
use crate::output::print_json;
use crate::store::Store;

/// The person at the terminal: asked there when a change needs a yes, unless `--yes`.
/// Staging a deletion is not asked: the person typed it, and runs it with `delete-staged`.
pub(super) struct AtTerminal {
    pub yes: bool,
    /// Who approves: with passkeys only, a staged deletion runs here only when a person
    /// answers at this terminal, and never for good.
    pub approvals: crate::approvals::Approvals,
}

#[async_trait]
impl Confirmation for AtTerminal {
    type Answer = Infallible;

    fn unasked(&self) -> bool {
        self.yes
    }

    fn runs_deletions(&self) -> bool {
        true
    }

    async fn confirm(&mut self, asking: Asking<'_>) -> Result<Confirmed<Infallible>> {
        match asking.preview {
            Preview::Change(plan) if !self.yes => confirm_on_terminal(plan, asking.reason)?,
            // A staged deletion's own rules: `--yes` alone never deletes for good unattended.
            Preview::Run {
                manifest, attended, ..
            } => {
                if self.yes {
                    self.approvals.refuse("delete-staged --yes")?;
                }
                if manifest.mode == mailbroker_core::DeleteMode::Permanent {
                    self.approvals.refuse("a deletion for good at a terminal")?;
                }
                super::delete::confirm(manifest, attended, self.yes)?
            }
            _ => {}
        }
        Ok(Confirmed::Yes)
    }
}

/// Runs `operation` as the CLI does: asking at the terminal unless `yes`.
pub(super) async fn change(
    home: &Home,
    store: &Store,
    operation: Operation,
    (dry_run, yes): (bool, bool),
) -> Result<Outcome<Infallible>> {
    let work = tokio_util::task::TaskTracker::new();
    let cx = change::Context {
        home,
        store,
        work: &work,
    };
    let request = ChangeRequest {
        operation,
        dry_run,
        origin: "cli".into(),
        confirm_above: change::DEFAULT_CONFIRM_ABOVE,
        // A person at the CLI confirms each write as it comes; no budget is spent.
        budget: None,
        follow: change::Follow::default(),
    };
    let approvals = crate::approvals::Approvals::of(store, false).await?;
    change::request(&cx, request, &mut AtTerminal { yes, approvals }).await
}

pub(super) async fn update(
    home: &Home,
    store: &Store,
    args: &UpdateArgs,
    json: bool,
) -> Result<u8> {
    let selection = Selection::of(&args.ids, args.query.as_deref())?;
    let operation = Operation::of_patch(selection, args.patch(), true)?;
    let outcome = change(home, store, operation, (args.dry_run, args.yes)).await?;
    print_outcome(store, outcome, json).await
}

/// `mailbroker undo`: asks as `update` does when the undo needs confirmation.
pub(super) async fn undo(
    home: &Home,
    store: &Store,
    change_id: i64,
    flags: (bool, bool),
    json: bool,
) -> Result<u8> {
    let operation = Operation::Undo { change: change_id };
    let outcome = change(home, store, operation, flags).await?;
    print_outcome(store, outcome, json).await
}

/// Prints how a change request ended, and the exit code that says it.
pub(super) async fn print_outcome(
    store: &Store,
    outcome: Outcome<Infallible>,
    json: bool,
) -> Result<u8> {
    match outcome {
        Outcome::DryRun {
            preview: Preview::Change(report),
            ..
        } => print_change(&report, json),
        Outcome::Done(report) => print_change(&report, json),
        Outcome::Running(running) => print_change(&running.finished().await?, json),
        Outcome::DryRun {
            preview: Preview::Staged { count, mode },
            ids,
            ..
        } => {
            super::delete::print_would_stage(store, count, mode, &ids, json).await?;
            Ok(0)
        }
        Outcome::Staged(manifest) => {
            super::delete::print_staged(&manifest, json)?;
            Ok(0)
        }
        Outcome::DryRun {
            preview: Preview::Run { plan, .. },
            ..
        } => super::delete::print_plan(&plan, json),
        Outcome::Ran { report, manifest } => super::delete::print_run(&report, &manifest, json),
        Outcome::Answered(never) => match never {},
    }
}

/// Asks the person at the terminal to confirm a write; without a terminal, `--yes` is needed.
fn confirm_on_terminal(plan: &change::ChangeReport, reason: &str) -> Result<()> {
    use std::io::{IsTerminal, Write};
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(Error::confirmation_required(format!(
            "this write needs confirmation: it {reason}"
        ))
        .with_next_step("check it with --dry-run, then add --yes"));
    }
    let mut err = std::io::stderr();
    for line in &plan.plan {
        let _ = writeln!(err, "  {line}");
    }
    let answer = crate::output::ask(&format!("This write {reason}. Proceed? [y/N] "))?;
    if matches!(answer.as_str(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(Error::confirmation_declined(
            "not confirmed; nothing was changed",
        ))
    }
}

/// Prints a change report; exits non-zero (as `verification_failed`/`stale_state`/…) when any
/// message is stale, failed or unknown, so scripts notice.
pub(super) fn print_change(report: &change::ChangeReport, json: bool) -> Result<u8> {
    if json {
        print_json(None, &change_json(report)?)?;
    } else {
        if report.dry_run {
            crate::say!(
                "dry run: nothing was changed; {} messages would change, {} already as asked",
                report.planned,
                report.tally.get(mailbroker_core::Outcome::Unchanged)
            );
        }
        for line in &report.plan {
            crate::say!("  {line}");
        }
        print_report_lines(report);
    }
    // An account the person must fix first says so as a command's own error would.
    if let Some(b) = &report.blocked {
        return Ok(b.exit_code as u8);
    }
    // The report is the output; the exit code only tells scripts that not everything happened.
    Ok(if !report.tally.settled() {
        CHANGE_INCOMPLETE
    } else {
        0
    })
}

/// A change report as JSON: `success` as on every surface (SPEC §6); a partial report
/// carries the §10 fields of what fell short, beside each message's outcome.
pub(super) fn change_json(report: &change::ChangeReport) -> Result<serde_json::Value> {
    let mut value = serde_json::to_value(report)
        .map_err(|e| mailbroker_core::Error::internal(format!("json: {e}")))?;
    value["success"] = report.success().into();
    if let Some(s) = report.shortfall() {
        value["error"] = s.error.into();
        value["error_type"] = s.error_type.into();
        value["next_step"] = s.next_step.into();
    }
    Ok(value)
}

/// A change report for a person, after its plan: the change, the counts, the fallback
/// routes, each failure, and what fell short with its next step.
pub(super) fn print_report_lines(report: &change::ChangeReport) {
    if let Some(id) = report.change_id {
        crate::say!("change {id}");
    }
    if let Some(d) = &report.draft {
        let place = d.mailbox.as_deref().unwrap_or("(not saved)");
        crate::say!(
            "draft in {place:?}, to {}; send it from your mail client",
            d.to.join(", ")
        );
    }
    if !report.dry_run {
        let counts: Vec<String> = report
            .tally
            .counts()
            .map(|(o, n)| format!("{}: {n}", o.as_str()))
            .collect();
        crate::say!("{}", counts.join(", "));
    }
    for (route, ids) in &report.routes {
        crate::say!(
            "carried by the {route} fallback (the account's own route was unavailable): {} message(s)",
            ids.len()
        );
    }
    for f in &report.failures {
        crate::say!("  message {}: {} {}", f.id, f.error_type, f.error);
    }
    if let Some(b) = report.shortfall() {
        crate::say_err!("error[{}]: {}", b.error_type, b.error);
        if let Some(step) = &b.next_step {
            crate::say_err!("next: {step}");
        }
    }
}

/// Exit code of an update or undo that left some messages stale or failed.
pub(super) const CHANGE_INCOMPLETE: u8 = 5;
