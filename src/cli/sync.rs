//! `mailbroker sync`: every account or one, with a progress bar, and what each found.

use mailbroker_core::{AccountId, Error, Result};

use crate::output::{self, print_json, progress_bar};
use crate::store::{Store, SyncProgress};
use crate::sync::AccountSyncReport;

/// A sync says that headers are searchable while text is still being filled in when the
/// text will take a noticeable time: a thousand messages or more.
const TEXT_NOTICE_AT: u64 = 1000;

pub(super) async fn run(
    store: &Store,
    account: Option<String>,
    full: bool,
    json: bool,
) -> Result<u8> {
    let ids: Vec<AccountId> = match account {
        Some(a) => vec![a.parse()?],
        None => super::owner(store).accounts_for(None).await?,
    };
    if ids.is_empty() {
        return Err(Error::not_found("no accounts to sync")
            .with_next_step("run: mailbroker account add imap --help"));
    }
    let mut reports = Vec::new();
    let mut failed: Vec<(AccountId, Error)> = Vec::new();
    for id in &ids {
        let synced = with_progress(store, id, full, json).await;
        match crate::sync::set_aside(ids.len(), synced)? {
            Ok(report) => {
                if !json {
                    print_report(&report);
                }
                reports.push(report);
            }
            Err(e) => {
                if !json {
                    crate::say_err!("{id}: not synced; the other accounts go on");
                    output::print_error(&e, false);
                }
                failed.push((id.clone(), e));
            }
        }
    }
    finish(&reports, &failed, json)
}

/// Syncs one account behind a progress bar (none with `--json`), saying once when headers
/// are searchable while a long text pass goes on.
async fn with_progress(
    store: &Store,
    id: &AccountId,
    full: bool,
    json: bool,
) -> Result<AccountSyncReport> {
    let bar = progress_bar(json);
    bar.set_message(format!("sync {id}"));
    let progress_bar = bar.clone();
    let name = id.clone();
    let mut said = false;
    let report = crate::sync::sync_account(store, id, full, move |p| {
        let (done, total) = match p {
            SyncProgress::Headers { fetched, total } => (fetched, total),
            SyncProgress::Text { filled, total } => {
                if !said && !json && total >= TEXT_NOTICE_AT {
                    said = true;
                    progress_bar.suspend(|| {
                        crate::say_err!(
                            "{name}: headers indexed (searchable by from:, subject:, tag:, \
                             dates); filling in the text of {total} messages for full-text \
                             search"
                        )
                    });
                    progress_bar.set_message(format!("sync {name}: text"));
                }
                (filled, total)
            }
        };
        progress_bar.set_length(total.max(done));
        progress_bar.set_position(done);
    })
    .await;
    bar.finish_and_clear();
    report
}

fn print_report(report: &AccountSyncReport) {
    let text = match report.text_filled {
        0 => String::new(),
        n => format!(", text of {n} filled in"),
    };
    crate::say!(
        "{}: +{} new, {} changed, {} removed{text} in {} ms ({} commands)",
        report.account,
        report.added,
        report.changed,
        report.removed,
        report.duration_ms,
        report.commands
    );
}

/// The reports (JSON), or the skipped mailboxes (text); the exit code.
fn finish(reports: &[AccountSyncReport], failed: &[(AccountId, Error)], json: bool) -> Result<u8> {
    let skipped: Vec<_> = reports
        .iter()
        .flat_map(|r| r.mailboxes.iter().map(move |m| (&r.account, m)))
        .filter_map(|(account, m)| Some((account, &m.mailbox, m.error.as_deref()?)))
        .collect();
    if json {
        let failed: Vec<_> = failed
            .iter()
            .map(|(id, e)| {
                let mut failure = output::error_fields(e);
                failure.insert("account".into(), id.as_str().into());
                serde_json::Value::Object(failure)
            })
            .collect();
        print_json(
            None,
            &serde_json::json!({ "accounts": reports, "failed": failed }),
        )?;
    } else {
        for (account, mailbox, error) in &skipped {
            crate::say!(
                "{account}: mailbox {mailbox:?} skipped ({error}); the next sync retries it"
            );
        }
    }
    // The others were synced; the exit code tells scripts that not everything was, and
    // why: a failed account's own code (fix the account, retry later…) before a skipped
    // mailbox's.
    if let Some((_, e)) = failed.first() {
        return Ok(e.exit_code() as u8);
    }
    Ok(if skipped.is_empty() { 0 } else { 5 })
}
