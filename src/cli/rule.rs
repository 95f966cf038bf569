//! `mailbroker rule`: server-side rules as manifests a person approves. `stage` records a
//! rule (and the exact text the server will be given) and sends nothing; `approve`, asked at
//! a terminal, installs it and reads it back (with `--backfill` the mail that matches today
//! gets the same actions as a second change); `list` shows the server's rules, mailbroker's
//! and the person's own; `remove` stages a removal; `undo CHANGE` puts the rules back.

use clap::{Args, Subcommand};
use mailbroker_core::{AccountId, Error, Patch, Result, Rule};

use crate::change::rules::{self, Staging};
use crate::change::{Operation, Outcome, Selection};
use crate::home::Home;
use crate::output::{Terminal, print_json};
use crate::store::{RuleAction, RuleManifest, RuleStatus, Store};

#[derive(Debug, Subcommand)]
pub enum RuleCommand {
    /// Record a rule for a person to approve; nothing is sent.
    Stage(StageRule),
    /// Stage the removal of one of mailbroker's rules.
    Remove {
        #[arg(long)]
        account: String,
        /// The rule's name.
        name: String,
    },
    /// Show the rule manifests (pending first), or one in full.
    Staged { id: Option<i64> },
    /// Install (or remove) a staged rule on the server, asked at this terminal.
    Approve { id: i64 },
    /// Cancel a pending rule manifest.
    Cancel { id: i64 },
    /// The rules on an account's server: mailbroker's and the person's own.
    List {
        #[arg(long)]
        account: String,
    },
}

#[derive(Debug, Args)]
pub struct StageRule {
    #[arg(long)]
    pub account: String,
    /// How `rule list` and `rule remove` name it.
    #[arg(long)]
    pub name: String,
    /// Which arriving mail: a query of from:, to:, cc:, subject:, list:, larger:, smaller:.
    #[arg(long, allow_hyphen_values = true)]
    pub when: String,
    /// Move it to this mailbox or role (not the trash).
    #[arg(long, value_name = "MAILBOX")]
    pub move_to: Option<String>,
    /// Add this tag (repeatable).
    #[arg(long, value_name = "TAG")]
    pub add_tag: Vec<String>,
    /// Mark it read.
    #[arg(long)]
    pub read: bool,
    /// Flag it.
    #[arg(long)]
    pub flag: bool,
    /// Once installed, do the same to the mail that matches today (a second change).
    #[arg(long)]
    pub backfill: bool,
}

pub async fn rule(home: &Home, store: &Store, cmd: RuleCommand, json: bool) -> Result<u8> {
    match cmd {
        RuleCommand::Stage(args) => stage(store, args, json).await,
        RuleCommand::Remove { account, name } => {
            let rule = Rule {
                name,
                query: String::new(),
                when: mailbroker_core::Condition::List(None),
                then: Patch::default(),
            };
            staged(store, account, RuleAction::Remove, rule, false, json).await
        }
        RuleCommand::Staged { id } => show(store, id, json).await,
        RuleCommand::Approve { id } => approve(home, store, id, json).await,
        RuleCommand::Cancel { id } => {
            store.settle_rule(id, RuleStatus::Cancelled, None).await?;
            print_json_or(
                json,
                &serde_json::json!({ "cancelled": id }),
                &format!("rule manifest {id} cancelled"),
            )
        }
        RuleCommand::List { account } => list(store, &account, json).await,
    }
}

async fn stage(store: &Store, a: StageRule, json: bool) -> Result<u8> {
    let now = crate::store::now_secs();
    let rule = Rule {
        name: a.name.trim().to_string(),
        when: crate::rules::condition(&a.when, now)?,
        query: a.when,
        then: Patch {
            move_to: a.move_to,
            add_tags: a.add_tag,
            read: a.read.then_some(true),
            flagged: a.flag.then_some(true),
            ..Patch::default()
        },
    };
    staged(
        store,
        a.account,
        RuleAction::Install,
        rule,
        a.backfill,
        json,
    )
    .await
}

async fn staged(
    store: &Store,
    account: String,
    action: RuleAction,
    rule: Rule,
    backfill: bool,
    json: bool,
) -> Result<u8> {
    let account: AccountId = account.parse()?;
    let staging = Staging {
        account,
        action,
        rule,
        backfill,
    };
    let m = rules::stage(store, staging, "cli").await?;
    if json {
        print_json(Some("rule_manifest"), &m)?;
        return Ok(0);
    }
    print_manifest(&m);
    crate::say!(
        "to carry it out, a person runs: mailbroker rule approve {}",
        m.id
    );
    Ok(0)
}

fn print_manifest(m: &RuleManifest) {
    let verb = match m.action {
        RuleAction::Install => "install",
        RuleAction::Remove => "remove",
    };
    crate::say!(
        "rule manifest {} [{}]: {verb} rule {:?} on account {} (staged by {})",
        m.id,
        serde_json::to_value(m.status)
            .unwrap_or_default()
            .as_str()
            .unwrap_or(""),
        m.rule.name,
        m.account,
        m.origin
    );
    if m.action == RuleAction::Install {
        crate::say!("  when: {}", m.rule.query);
        crate::say!(
            "  then: {}",
            crate::change::words::patch_words(&m.rule.then)
        );
        crate::say!(
            "  matches today: {} indexed message(s){}",
            m.matches,
            match m.backfill {
                true => ", which will get the same once it is installed",
                false => "",
            }
        );
    }
    crate::say!("  the server will be given:");
    for line in m.provider_text.lines() {
        crate::say!("    {line}");
    }
}

async fn show(store: &Store, id: Option<i64>, json: bool) -> Result<u8> {
    let manifests = match id {
        Some(id) => vec![store.rule_manifest(id).await?],
        None => store.rule_manifests().await?,
    };
    if json {
        print_json(Some("rule_manifests"), &manifests)?;
        return Ok(0);
    }
    if manifests.is_empty() {
        crate::say!("no rule manifests");
    }
    manifests.iter().for_each(print_manifest);
    Ok(0)
}

/// A person at this terminal reads the manifest and types yes; then it is carried out, and
/// its backfill runs as a second change.
async fn approve(home: &Home, store: &Store, id: i64, json: bool) -> Result<u8> {
    crate::approvals::Approvals::of(store, false)
        .await?
        .refuse("mailbroker rule approve")?;
    let mut person = Terminal::open("approving a rule on a mail server")?;
    let m = store.rule_manifest(id).await?;
    person.say(&format!(
        "rule {:?} on account {}: when {} then {}",
        m.rule.name,
        m.account,
        m.rule.query,
        crate::change::words::patch_words(&m.rule.then)
    ));
    for line in m.provider_text.lines() {
        person.say(&format!("  {line}"));
    }
    if person.ask("Type yes to carry it out on the server: ")? != "yes" {
        return Err(Error::confirmation_declined(
            "not approved; nothing was changed",
        ));
    }
    let done = super::update::change(home, store, Operation::Rule { manifest: id }, (false, true));
    let Outcome::Done(report) = done.await? else {
        return Err(Error::internal("a rule's change ended without a report"));
    };
    let mut code = super::update::print_change(&report, json)?;
    if m.backfill {
        let query = format!("account:{} ({})", m.account, m.rule.query);
        let operation = Operation::of_patch(Selection::of(&[], Some(&query))?, m.rule.then, true)?;
        let outcome = super::update::change(home, store, operation, (false, true)).await?;
        code = code.max(super::update::print_outcome(store, outcome, json).await?);
    }
    Ok(code)
}

async fn list(store: &Store, account: &str, json: bool) -> Result<u8> {
    let account: AccountId = account.parse()?;
    let listed = mailbroker_engine::change::rules::list(store, &account).await?;
    if json {
        print_json(Some("rules"), &listed)?;
        return Ok(0);
    }
    for r in &listed {
        crate::say!(
            "{} {:?}{}{}",
            if r.ours {
                "mailbroker's"
            } else {
                "the person's"
            },
            r.name,
            if r.enabled { "" } else { " (not active)" },
            if r.forwards {
                " — sends mail elsewhere (never changed by mailbroker)"
            } else {
                ""
            }
        );
    }
    Ok(0)
}

fn print_json_or(json: bool, value: &serde_json::Value, line: &str) -> Result<u8> {
    match json {
        true => print_json(None, value)?,
        false => crate::say!("{line}"),
    }
    Ok(0)
}
