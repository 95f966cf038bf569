//! Server-side rules through the change request. Staging records a rule manifest: the rule,
//! the exact text the server will be given, and how many indexed messages match it today;
//! nothing is sent. Carrying one out, once a person approved it, journals the intent, writes
//! the account's rules (the adapter checks and reads them back) and records what they
//! replaced; an undo puts that back.

use mailbroker_core::{AccountId, Error, Outcome, Result, Rule, RulesBefore, ServerRule, Tally};
use mailbroker_store::{Asked, ChangeRecord, Chosen, RuleAction, RuleManifest, RuleStatus, Store};

use super::update::ChangeReport;
use crate::{registry, sessions};

/// What a rule manifest stages.
pub struct Staging {
    pub account: AccountId,
    pub action: RuleAction,
    /// The rule to install, or (to remove) one with the name of mailbroker's rule to remove.
    pub rule: Rule,
    pub backfill: bool,
}

/// Records a rule manifest for a person to approve; nothing is sent.
pub async fn stage(store: &Store, s: Staging, origin: &str) -> Result<RuleManifest> {
    let record = store.account(&s.account).await?;
    let rule = match s.action {
        RuleAction::Install => s.rule,
        RuleAction::Remove => ours(store, &s.account, &s.rule.name).await?,
    };
    rule.validate()?;
    let choices: Vec<(String, Option<mailbroker_core::Role>)> = (store.mailboxes(&s.account))
        .await?
        .into_iter()
        .filter(|m| m.selectable)
        .map(|m| (m.name, m.role))
        .collect();
    let provider_text =
        registry::adapter(record.provider)?.rule_text(&record.info(), &rule, &choices)?;
    let now = mailbroker_store::now_secs();
    let query = mailbroker_query::parse(&rule.query, now)?.in_account(s.account.as_str());
    let mut manifest = RuleManifest {
        id: 0,
        account: s.account,
        action: s.action,
        matches: store.count(&query).await?,
        rule,
        provider_text,
        backfill: s.backfill && s.action == RuleAction::Install,
        status: RuleStatus::Pending,
        origin: origin.to_string(),
        created_at: now,
        change_id: None,
    };
    manifest.id = store.stage_rule(&manifest).await?;
    Ok(manifest)
}

/// mailbroker's rule `name` on `account`, as it was installed.
async fn ours(store: &Store, account: &AccountId, name: &str) -> Result<Rule> {
    (store.account_rules(account).await?)
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| {
            Error::not_found(format!(
                "account {account} has no rule of mailbroker's named {name:?}"
            ))
            .with_next_step(format!(
                "see its rules: mailbroker rule list --account {account}"
            ))
        })
}

/// A change of rules as its journal line and report have it.
fn record(origin: &str, selection: Chosen, patch: Asked, plan: Vec<String>) -> ChangeRecord {
    ChangeRecord::intent(origin, selection, patch, plan)
}

fn report(change_id: i64, plan: Vec<String>) -> ChangeReport {
    let mut tally = Tally::default();
    tally.add(Outcome::Applied);
    ChangeReport {
        change_id: Some(change_id),
        plan,
        planned: 1,
        tally,
        ..ChangeReport::default()
    }
}

/// Carries out the pending rule manifest `id` (a person approved it): journaled first, then
/// written on the account's server and read back.
pub(super) async fn carry_out(store: &Store, id: i64, origin: &str) -> Result<ChangeReport> {
    let m = store.rule_manifest(id).await?;
    if m.status != RuleStatus::Pending {
        return Err(Error::validation(format!(
            "rule manifest {id} is {}: there is nothing to carry out",
            serde_json::to_value(m.status).unwrap_or_default()
        )));
    }
    let ours = store.account_rules(&m.account).await?;
    let mut after: Vec<Rule> = (ours.iter())
        .filter(|r| r.name != m.rule.name)
        .cloned()
        .collect();
    if m.action == RuleAction::Install {
        after.push(m.rule.clone());
    }
    let plan: Vec<String> = m.provider_text.lines().map(str::to_string).collect();
    let asked = Asked::Rules {
        rule: m.rule.name.clone(),
        action: m.action,
    };
    let intent = record(
        origin,
        Chosen::RuleManifest { rule_manifest: id },
        asked,
        plan.clone(),
    );
    let change_id = store.open_change(&intent).await?;
    match put(store, &m.account, &ours, &after).await {
        Ok(before) => {
            store
                .record_rule_change(change_id, &m.account, &before, &after)
                .await?;
            store.close_change(change_id, &[]).await?;
            store
                .settle_rule(id, RuleStatus::Done, Some(change_id))
                .await?;
            Ok(report(change_id, plan))
        }
        Err(e) => {
            // Refused before anything was sent (a missing permission, say): it stays
            // pending, for the person to approve again once the refusal is met.
            if !settle_failed(store, change_id, &e).await? {
                store
                    .settle_rule(id, RuleStatus::Failed, Some(change_id))
                    .await?;
            }
            Err(e)
        }
    }
}

/// A change of rules that failed: a refusal before anything was written leaves no journal
/// line (and says so: `true`); anything else may have reached the server, and its line
/// stays.
async fn settle_failed(store: &Store, change_id: i64, e: &Error) -> Result<bool> {
    match e.error_type() {
        "validation_error" | "unsupported" | "auth_required" | "insufficient_scope" => {
            store.discard_change(change_id).await?;
            Ok(true)
        }
        _ => store.close_change(change_id, &[]).await.map(|()| false),
    }
}

async fn put(
    store: &Store,
    account: &AccountId,
    ours: &[Rule],
    rules: &[Rule],
) -> Result<RulesBefore> {
    let mut session = sessions::open(store, account).await?;
    let done = session.provider.put_rules(ours, rules).await;
    session.close().await;
    done
}

/// The rules on `account`'s server, mailbroker's and the person's own.
pub async fn list(store: &Store, account: &AccountId) -> Result<Vec<ServerRule>> {
    let ours = store.account_rules(account).await?;
    let mut session = sessions::open(store, account).await?;
    let listed = session.provider.rules(&ours).await;
    session.close().await;
    listed
}

/// Undoes change `change_id` if it changed an account's rules: the server's rules and
/// mailbroker's list put back as they were before it. `None` for any other change.
pub(super) async fn undo(
    store: &Store,
    change_id: i64,
    origin: &str,
) -> Result<Option<ChangeReport>> {
    let Some((account, before, rules_before)) = store.rule_change(change_id).await? else {
        return Ok(None);
    };
    if let Some(by) = store.change(change_id).await?.undone_by {
        return Err(Error::stale_state(format!(
            "change {change_id} was already undone by change {by}"
        )));
    }
    let plan = vec![format!(
        "put the rules of account {account} back as they were before change {change_id}"
    )];
    let intent = record(
        origin,
        Chosen::UndoOf { undo_of: change_id },
        Asked::Undo { undo_of: change_id },
        plan.clone(),
    );
    let undo_id = store.open_change(&intent).await?;
    let mut session = sessions::open(store, &account).await?;
    let done = session.provider.restore_rules(&before).await;
    session.close().await;
    match done {
        Ok(now) => {
            store
                .record_rule_change(undo_id, &account, &now, &rules_before)
                .await?;
            store.close_change(undo_id, &[]).await?;
            Ok(Some(report(undo_id, plan)))
        }
        Err(e) => {
            settle_failed(store, undo_id, &e).await?;
            Err(e)
        }
    }
}
