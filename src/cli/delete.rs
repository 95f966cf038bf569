//! `mailbroker stage-delete` and `mailbroker delete-staged`: the person's side of deletion.

use clap::Args;
use mailbroker_core::{AccountId, DeleteMode, Error, Result, Summary};

use super::owner;
use super::views::ManifestJson;
use crate::change::delete;
use crate::change::{ChangeReport, Operation, Selection};
use crate::home::Home;
use crate::listing::{Manifest, ManifestStatus};
use crate::output::{Terminal, print_json, progress_bar};
use crate::store::Store;

#[derive(Debug, Args)]
pub struct StageArgs {
    /// Search query selecting the messages (see `search`).
    #[arg(required = true, allow_hyphen_values = true, trailing_var_arg = true)]
    pub query: Vec<String>,
    /// Delete for good instead of moving to the trash.
    #[arg(long)]
    pub permanent: bool,
    /// Show what would be staged; stage nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse when more messages than this match (at most 100,000).
    #[arg(long, default_value_t = delete::MAX_MESSAGES)]
    pub max_messages: usize,
}

#[derive(Debug, Args)]
pub struct DeleteStagedArgs {
    /// The manifest to run; without one, pending manifests are listed.
    pub id: Option<i64>,
    /// Show a manifest in full (with its items).
    #[arg(long, value_name = "ID", conflicts_with_all = ["id", "cancel"])]
    pub show: Option<i64>,
    /// Cancel a manifest; it can never run afterwards.
    #[arg(long, value_name = "ID", conflicts_with = "id")]
    pub cancel: Option<i64>,
    /// Print the exact plan and send nothing.
    #[arg(long, requires = "id")]
    pub dry_run: bool,
    /// Run without asking (required when not on a terminal).
    #[arg(long, requires = "id")]
    pub yes: bool,
    /// Messages per server batch and checkpoint.
    #[arg(long, default_value_t = delete::DEFAULT_BATCH as u64, value_parser = clap::value_parser!(u64).range(1..=5000))]
    pub batch_size: u64,
}

pub async fn stage(home: &Home, store: &Store, args: StageArgs, json: bool) -> Result<()> {
    let query = args.query.join(" ");
    let mode = if args.permanent {
        DeleteMode::Permanent
    } else {
        DeleteMode::Trash
    };
    let operation = Operation::Stage {
        selection: Selection::of(&[], Some(&query))?,
        mode,
        limit: args.max_messages,
    };
    let outcome = super::update::change(home, store, operation, (args.dry_run, false)).await?;
    super::update::print_outcome(store, outcome, json).await?;
    Ok(())
}

/// What a dry run of staging shows: the summary the manifest would record.
pub(super) async fn print_would_stage(
    store: &Store,
    count: u64,
    mode: DeleteMode,
    ids: &[i64],
    json: bool,
) -> Result<()> {
    let summary = owner(store).summary(ids).await?;
    if json {
        return print_json(
            Some("would_stage"),
            &serde_json::json!({ "count": count, "mode": mode, "summary": summary }),
        );
    }
    crate::say!(
        "would stage {count} message(s), {} bytes, for {} deletion",
        summary.bytes,
        mode.as_str()
    );
    selection_lines(&summary)
        .iter()
        .for_each(|l| crate::say!("{l}"));
    Ok(())
}

/// A staged manifest, and how to run it.
pub(super) fn print_staged(manifest: &Manifest, json: bool) -> Result<()> {
    if json {
        return print_json(Some("manifest"), &ManifestJson::from(manifest));
    }
    print_summary(manifest);
    crate::say!("run: mailbroker delete-staged {}", manifest.id);
    Ok(())
}

fn print_summary(m: &Manifest) {
    for line in summary_lines(m) {
        crate::say!("{line}");
    }
}

/// A manifest as a person reads it: its counts, then its senders and mailboxes.
fn summary_lines(m: &Manifest) -> Vec<String> {
    let s = &m.summary;
    let mut lines = vec![format!(
        "manifest {} [{}] {}: {} message(s), {} bytes, from {} ({})",
        m.id,
        m.status,
        m.mode.as_str(),
        s.count,
        s.bytes,
        m.origin,
        serde_json::to_string(&m.selection).unwrap_or_default()
    )];
    lines.extend(selection_lines(s));
    lines
}

/// A selection summary's senders and mailboxes, a line each.
fn selection_lines(s: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    for sender in s.top_senders.iter().take(10) {
        lines.push(format!("  {:>6}  {}", sender.messages, sender.from));
    }
    for (name, n) in &s.mailboxes {
        lines.push(format!("  {n:>6}  in {name}"));
    }
    lines
}

/// Asks the person at the terminal to run manifest `m`; permanent deletion needs the word
/// `delete` typed.
///
/// Trash mode (undoable) asks on stdin when it is a terminal, or takes `--yes`. Permanent
/// mode asks at the controlling terminal only, `--yes` or not, unless a person allowed every
/// account of the run to be deleted from unattended (`attended` is empty: `account set ID
/// --unattended-deletions`, itself made at a terminal): a program without a terminal cannot
/// delete mail for good on its own.
pub(super) fn confirm(m: &Manifest, attended: &[AccountId], yes: bool) -> Result<()> {
    match m.mode {
        DeleteMode::Trash => confirm_trash(m, yes),
        DeleteMode::Permanent => {
            if yes && attended.is_empty() {
                return Ok(());
            }
            let mut person = Terminal::open(&format!(
                "deleting the {} message(s) of manifest {} for good",
                m.summary.count, m.id
            ))
            .map_err(|e| match attended.first() {
                Some(account) => e.with_next_step(format!(
                    "run it yourself in a terminal; for unattended runs (cron), allow them \
                     once at a terminal: mailbroker account set {account} --unattended-deletions"
                )),
                None => e,
            })?;
            for line in summary_lines(m) {
                person.say(&line);
            }
            let answer = person.ask("They will be deleted for good. Type delete to go on: ")?;
            match answer == "delete" {
                true => Ok(()),
                false => Err(Error::confirmation_declined(
                    "not confirmed; nothing was deleted",
                )),
            }
        }
    }
}

fn confirm_trash(m: &Manifest, yes: bool) -> Result<()> {
    use std::io::IsTerminal;
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::confirmation_required(format!(
            "deleting the {} message(s) of manifest {} needs confirmation",
            m.summary.count, m.id
        ))
        .with_next_step(format!(
            "run it on a terminal, or add --yes: mailbroker delete-staged {} --yes",
            m.id
        )));
    }
    print_summary(m);
    let answer = crate::output::ask("Move these messages to the trash? [y/N] ")?;
    if answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes") {
        Ok(())
    } else {
        Err(Error::confirmation_declined(
            "not confirmed; nothing was deleted",
        ))
    }
}

pub async fn delete_staged(
    home: &Home,
    store: &Store,
    args: DeleteStagedArgs,
    json: bool,
) -> Result<u8> {
    if let Some(id) = args.show {
        show(store, id, json).await?;
        return Ok(0);
    }
    if let Some(id) = args.cancel {
        let manifest = delete::cancel(store, id).await?;
        if json {
            print_json(Some("manifest"), &ManifestJson::from(&manifest))?;
        } else {
            crate::say!("manifest {id} cancelled");
        }
        return Ok(0);
    }
    let Some(id) = args.id else {
        list_pending(store, json).await?;
        return Ok(0);
    };
    let bar = progress_bar(json || args.dry_run);
    let shown = bar.clone();
    let operation = Operation::Run {
        manifest: id,
        batch_size: args.batch_size as usize,
        progress: delete::Progress::new(move |done, total| {
            shown.set_length(total);
            shown.set_position(done);
        }),
    };
    let outcome = super::update::change(home, store, operation, (args.dry_run, args.yes)).await;
    bar.finish_and_clear();
    super::update::print_outcome(store, outcome?, json).await
}

/// `delete-staged --show ID`: the manifest and each of its items.
async fn show(store: &Store, id: i64, json: bool) -> Result<()> {
    let manifest = owner(store).manifest(id, true).await?;
    let runs = owner(store).manifest_runs(id).await?;
    if json {
        let mut shown = ManifestJson::from(&manifest);
        shown.runs = runs.iter().map(|run| run.id).collect();
        return print_json(Some("manifest"), &shown);
    }
    print_summary(&manifest);
    for run in &runs {
        crate::say!("  run by change {} ({})", run.id, run.origin);
    }
    for item in &manifest.items {
        let error = item
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(" ({e})"));
        crate::say!(
            "  {} {}/{} ({}): {}{error}",
            item.message_id,
            item.account,
            item.mailbox,
            item.remote_id,
            item.status
        );
    }
    Ok(())
}

/// `delete-staged`: the manifests still to run (pending, interrupted or failed).
async fn list_pending(store: &Store, json: bool) -> Result<()> {
    let statuses = [
        ManifestStatus::Pending,
        ManifestStatus::Executing,
        ManifestStatus::Failed,
    ];
    let pending = owner(store).manifests(&statuses, 100).await?;
    if json {
        let list: Vec<_> = pending.iter().map(ManifestJson::from).collect();
        return print_json(Some("manifests"), &list);
    }
    if pending.is_empty() {
        crate::say!("no staged deletions");
    }
    pending.iter().for_each(print_summary);
    Ok(())
}

/// What a run did: the manifest's status and counts, then the change's report; exit 5 when
/// not every message was deleted or already gone (SPEC §6's `success`).
pub(super) fn print_run(report: &ChangeReport, m: &Manifest, json: bool) -> Result<u8> {
    if json {
        let mut value = super::update::change_json(report)?;
        value["manifest_id"] = m.id.into();
        value["status"] = m.status.to_string().into();
        value["counts"] =
            serde_json::to_value(m.counts).map_err(|e| Error::internal(format!("json: {e}")))?;
        print_json(None, &value)?;
    } else {
        crate::say!(
            "manifest {}: {} (its messages: {})",
            m.id,
            m.status,
            m.counts
        );
        super::update::print_report_lines(report);
    }
    Ok(match report.success() {
        true => 0,
        false => super::update::CHANGE_INCOMPLETE,
    })
}

/// A run's dry run: the exact plan, nothing sent.
pub(super) fn print_plan(plan: &[String], json: bool) -> Result<u8> {
    if json {
        print_json(Some("plan"), &plan)?;
    } else {
        plan.iter().for_each(|line| crate::say!("{line}"));
    }
    Ok(0)
}
