//! `propose_rule`: an assistant lists an account's server rules, or proposes one (or the
//! removal of one of mailbroker's) as a manifest a person approves; it never installs one.

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use super::McpServer;
use super::shape::Brief;
use crate::change::rules::{self, Staging};
use crate::store::{RuleAction, RuleManifest};
use mailbroker_core::{Condition, Error, Patch, Result, Rule};

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RuleToolAction {
    // list: the server's rules, mailbroker's and the user's; propose: stage a rule; remove:
    // stage the removal of mailbroker's rule `name`. (Comments, not docs: the schema stays
    // small, and the tool's description says it.)
    List,
    Propose,
    Remove,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProposeRuleArgs {
    pub account: String,
    pub action: RuleToolAction,
    pub name: Option<String>,
    /// Query of from: to: cc: subject: list: larger: smaller:
    pub when: Option<String>,
    pub move_to: Option<String>,
    #[serde(default)]
    pub add_tags: Vec<String>,
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub flag: bool,
    /// Also to today's matches, once approved.
    #[serde(default)]
    pub backfill: bool,
}

/// A rule on the server.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RuleView {
    pub name: String,
    pub ours: bool,
    pub enabled: bool,
    /// Sends mail elsewhere; mailbroker never changes it.
    pub forwards: bool,
}

/// A staged rule manifest, for the user to approve.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ManifestView {
    pub id: i64,
    pub account: String,
    pub action: String,
    pub name: String,
    pub when: String,
    pub then: String,
    /// The exact text the server will be given.
    pub provider_text: String,
    /// Indexed messages matching today.
    pub matches: u64,
    pub backfill: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RulesOut {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_manifest: Option<ManifestView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

impl Brief for RulesOut {
    fn brief(&self) -> String {
        match (&self.rules, &self.rule_manifest) {
            (Some(rules), _) => format!("{} rule(s) on the server", rules.len()),
            (_, Some(m)) => format!(
                "rule manifest {} staged ({} {:?}); the user approves it",
                m.id, m.action, m.name
            ),
            _ => "no rules".into(),
        }
    }
}

fn needed(what: &str) -> Error {
    Error::validation(format!("{what} is required for this action"))
        .with_next_step("give name and when (and what the rule does) to propose; name to remove")
}

impl McpServer {
    pub(super) async fn rules_view(&self, args: ProposeRuleArgs, origin: &str) -> Result<RulesOut> {
        let account = self
            .accounts_for(Some(args.account.clone()))
            .await?
            .remove(0);
        let (action, rule) = match args.action {
            RuleToolAction::List => return self.server_rules(&account).await,
            RuleToolAction::Remove => {
                let name = args.name.ok_or_else(|| needed("name"))?;
                let rule = Rule {
                    name,
                    query: String::new(),
                    when: Condition::List(None),
                    then: Patch::default(),
                };
                (RuleAction::Remove, rule)
            }
            RuleToolAction::Propose => {
                let when = args.when.ok_or_else(|| needed("when"))?;
                let rule = Rule {
                    name: args.name.ok_or_else(|| needed("name"))?,
                    when: crate::rules::condition(&when, crate::store::now_secs())?,
                    query: when,
                    then: Patch {
                        move_to: args.move_to,
                        add_tags: args.add_tags,
                        read: args.read.then_some(true),
                        flagged: args.flag.then_some(true),
                        ..Patch::default()
                    },
                };
                (RuleAction::Install, rule)
            }
        };
        let staging = Staging {
            account,
            action,
            rule,
            backfill: args.backfill,
        };
        let m = rules::stage(&self.store, staging, origin).await?;
        let id = m.id;
        Ok(RulesOut {
            success: true,
            rules: None,
            rule_manifest: Some(view(m)),
            next_step: Some(format!(
                "show the user the rule and the text above, and ask them to approve it: mailbroker rule approve {id} (at a terminal); you cannot install it yourself"
            )),
        })
    }

    async fn server_rules(&self, account: &mailbroker_core::AccountId) -> Result<RulesOut> {
        let listed = mailbroker_engine::change::rules::list(&self.store, account).await?;
        let rules = (listed.into_iter())
            .map(|r| RuleView {
                name: r.name,
                ours: r.ours,
                enabled: r.enabled,
                forwards: r.forwards,
            })
            .collect();
        Ok(RulesOut {
            success: true,
            rules: Some(rules),
            rule_manifest: None,
            next_step: None,
        })
    }
}

fn view(m: RuleManifest) -> ManifestView {
    ManifestView {
        id: m.id,
        account: m.account.to_string(),
        action: match m.action {
            RuleAction::Install => "install".into(),
            RuleAction::Remove => "remove".into(),
        },
        then: crate::change::words::patch_words(&m.rule.then),
        name: m.rule.name,
        when: m.rule.query,
        provider_text: m.provider_text,
        matches: m.matches,
        backfill: m.backfill,
    }
}
