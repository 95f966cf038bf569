//! `mailbroker update`: the person's side of the write pipeline, and how a change report is
//! printed (for `undo` too).

use mailbroker_core::{Error, Result};

use super::UpdateArgs;
use crate::home::Home;
use crate::output::print_json;
use crate::sessions::Sessions;
use crate::store::Store;
use crate::write::{self, CheckedRequest};

pub(super) async fn update(
    home: &Home,
    store: &Store,
    args: &UpdateArgs,
    json: bool,
) -> Result<u8> {
    let patch = args.patch();
    patch.validate()?;
    if let Some(mode) = patch.delete {
        let (selection, rows) =
            write::resolve_selection(store, &args.ids, args.query.as_deref()).await?;
        let manifest = crate::delete::stage(
            store,
            "cli",
            &selection,
            &rows,
            mode,
            crate::delete::MAX_MESSAGES,
        )
        .await?;
        if json {
            print_json(
                Some("manifest"),
                &super::views::ManifestJson::from(&manifest),
            )?;
        } else {
            crate::say!(
                "staged manifest {} ({} message(s)); run: mailbroker delete-staged {}",
                manifest.id,
                manifest.summary["count"],
                manifest.id
            );
        }
        return Ok(0);
    }
    let checked = CheckedRequest::check(store, &args.ids, args.query.as_deref(), &patch).await?;
    // Nobody will be asked: the sessions open while the targets are read.
    let sessions = match args.yes && !args.dry_run {
        true => write::open_ahead(home, store, &checked).await?,
        false => Sessions::new(home, store),
    };
    let resolved = checked.resolve(store).await?;
    run_or_preview(resolved, sessions, store, (args.dry_run, args.yes), json).await
}

/// Prints the plan of a dry run; otherwise asks on the terminal when the change needs it
/// (unless `--yes`), runs it and prints its report.
async fn run_or_preview(
    resolved: write::ResolvedRequest,
    sessions: Sessions,
    store: &Store,
    (dry_run, yes): (bool, bool),
    json: bool,
) -> Result<u8> {
    if dry_run {
        return print_change(resolved.preview(), json);
    }
    if !yes
        && let Some(reason) = resolved
            .preview()
            .confirmation_reason(write::DEFAULT_CONFIRM_ABOVE)
    {
        confirm_on_terminal(resolved.preview(), &reason)?;
    }
    let report = resolved.run(sessions, store, "cli").await?;
    print_change(&report, json)
}

/// `mailbroker undo`: asks as `update` does when the undo needs confirmation.
pub(super) async fn undo(
    home: &Home,
    store: &Store,
    change: i64,
    (dry_run, yes): (bool, bool),
    json: bool,
) -> Result<u8> {
    let resolved = crate::undo::resolve(store, change).await?;
    run_or_preview(
        resolved,
        Sessions::new(home, store),
        store,
        (dry_run, yes),
        json,
    )
    .await
}

/// Asks the person at the terminal to confirm a write; without a terminal, `--yes` is needed.
fn confirm_on_terminal(plan: &write::ChangeReport, reason: &str) -> Result<()> {
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
/// message failed, so scripts notice.
pub(super) fn print_change(report: &write::ChangeReport, json: bool) -> Result<u8> {
    if json {
        print_json(None, report)?;
    } else {
        if report.dry_run {
            crate::say!(
                "dry run: nothing was changed; {} messages would change, {} already as asked",
                report.planned,
                report.unchanged
            );
        }
        for line in &report.plan {
            crate::say!("  {line}");
        }
        if let Some(id) = report.change_id {
            crate::say!("change {id}");
        }
        if !report.dry_run {
            crate::say!(
                "applied: {}, unchanged: {}, stale: {}, failed: {}",
                report.applied,
                report.unchanged,
                report.stale,
                report.failed
            );
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
        if let Some(b) = &report.blocked {
            crate::say_err!("error[{}]: {}", b.error_type, b.error);
            if let Some(step) = &b.next_step {
                crate::say_err!("next: {step}");
            }
        }
    }
    // An account the person must fix first says so as a command's own error would.
    if let Some(b) = &report.blocked {
        return Ok(b.exit_code as u8);
    }
    // The report is the output; the exit code only tells scripts that not everything happened.
    Ok(if report.failed + report.stale > 0 {
        CHANGE_INCOMPLETE
    } else {
        0
    })
}

/// Exit code of an update or undo that left some messages stale or failed.
const CHANGE_INCOMPLETE: u8 = 5;
