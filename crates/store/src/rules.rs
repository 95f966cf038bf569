//! Server-side rules as the index keeps them: rule manifests a person approves (a rule to
//! install on an account's server, or one of mailbroker's to remove), mailbroker's rules now
//! on each account's server, and what each journaled change of rules replaced, for its undo.

use mailbroker_core::{AccountId, Error, Rule, RulesBefore};
use serde::Serialize;

use super::sql::text_column;
use super::{Store, db_error, now_secs};

/// What a rule manifest asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    Install,
    Remove,
}

text_column!(RuleAction {
    Install = "install",
    Remove = "remove",
});

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleStatus {
    /// Waiting for a person.
    Pending,
    Done,
    Cancelled,
    /// Approved, and the server refused it.
    Failed,
}

text_column!(RuleStatus {
    Pending = "pending",
    Done = "done",
    Cancelled = "cancelled",
    Failed = "failed",
});

/// A rule manifest: what will be written, where, and what it would touch today.
#[derive(Debug, Clone, Serialize)]
pub struct RuleManifest {
    pub id: i64,
    pub account: AccountId,
    pub action: RuleAction,
    pub rule: Rule,
    /// The text the server will be given (a Sieve block), exactly.
    pub provider_text: String,
    /// Indexed messages that match the rule today.
    pub matches: u64,
    /// Whether, once installed, the same actions are applied to those messages too.
    pub backfill: bool,
    pub status: RuleStatus,
    pub origin: String,
    pub created_at: i64,
    /// The journal's change that carried it out.
    pub change_id: Option<i64>,
}

type Row = (
    i64,
    String,
    RuleAction,
    String,
    String,
    i64,
    i64,
    RuleStatus,
    String,
    i64,
    Option<i64>,
);

const COLUMNS: &str = "id, account, action, rule, provider_text, matches, backfill, status, origin,
                       created_at, change_id";

fn bad(e: impl std::fmt::Display) -> Error {
    Error::internal(format!("a rule as the index keeps it: {e}"))
}

fn manifest_of(r: Row) -> Result<RuleManifest, Error> {
    Ok(RuleManifest {
        id: r.0,
        account: r.1.parse()?,
        action: r.2,
        rule: serde_json::from_str(&r.3).map_err(bad)?,
        provider_text: r.4,
        matches: r.5.max(0) as u64,
        backfill: r.6 != 0,
        status: r.7,
        origin: r.8,
        created_at: r.9,
        change_id: r.10,
    })
}

/// mailbroker's rules on `account`, by name, read through `db` (the pool, or a transaction).
async fn rules_of<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    account: &AccountId,
) -> Result<Vec<Rule>, Error> {
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT rule FROM account_rules WHERE account = $1 ORDER BY name")
            .bind(account.as_str())
            .fetch_all(db)
            .await
            .map_err(db_error)?;
    (rows.into_iter())
        .map(|(rule,)| serde_json::from_str(&rule).map_err(bad))
        .collect()
}

fn json(v: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string(v).map_err(bad)
}

impl Store {
    /// Records a rule manifest, pending; nothing is sent anywhere.
    pub async fn stage_rule(&self, m: &RuleManifest) -> Result<i64, Error> {
        sqlx::query_scalar(
            "INSERT INTO rule_manifests (account, name, action, rule, provider_text, matches,
               backfill, status, origin, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) RETURNING id",
        )
        .bind(m.account.as_str())
        .bind(&m.rule.name)
        .bind(m.action)
        .bind(json(&m.rule)?)
        .bind(&m.provider_text)
        .bind(m.matches as i64)
        .bind(i64::from(m.backfill))
        .bind(&m.origin)
        .bind(now_secs())
        .fetch_one(self.pool())
        .await
        .map_err(db_error)
    }

    pub async fn rule_manifest(&self, id: i64) -> Result<RuleManifest, Error> {
        let sql = format!("SELECT {COLUMNS} FROM rule_manifests WHERE id = $1");
        let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .map_err(db_error)?;
        match row {
            Some(row) => manifest_of(row),
            None => Err(Error::not_found(format!("no rule manifest {id}"))
                .with_next_step("list them: mailbroker rule staged")),
        }
    }

    /// Every rule manifest, newest first.
    pub async fn rule_manifests(&self) -> Result<Vec<RuleManifest>, Error> {
        let sql = format!("SELECT {COLUMNS} FROM rule_manifests ORDER BY id DESC");
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await
            .map_err(db_error)?;
        rows.into_iter().map(manifest_of).collect()
    }

    /// Settles a pending manifest: `status`, and the change that carried it out.
    pub async fn settle_rule(
        &self,
        id: i64,
        status: RuleStatus,
        change_id: Option<i64>,
    ) -> Result<(), Error> {
        let done = sqlx::query(
            "UPDATE rule_manifests SET status = $1, change_id = $2
             WHERE id = $3 AND status = 'pending'",
        )
        .bind(status)
        .bind(change_id)
        .bind(id)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        match done.rows_affected() {
            0 => Err(Error::validation(format!(
                "rule manifest {id} is not pending"
            ))),
            _ => Ok(()),
        }
    }

    /// mailbroker's rules now on `account`'s server, by name.
    pub async fn account_rules(&self, account: &AccountId) -> Result<Vec<Rule>, Error> {
        rules_of(self.pool(), account).await
    }

    /// Records what change `change_id` replaced on `account` (the server's `before`, and
    /// mailbroker's rules then), and makes `after` mailbroker's rules there: one transaction.
    pub async fn record_rule_change(
        &self,
        change_id: i64,
        account: &AccountId,
        before: &RulesBefore,
        after: &[Rule],
    ) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        let rules_before = rules_of(&mut *tx, account).await?;
        sqlx::query(
            "INSERT INTO rule_changes (change_id, account, before, rules_before)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(change_id)
        .bind(account.as_str())
        .bind(&before.0)
        .bind(json(&rules_before)?)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        super::drafts::applied_one(&mut tx, change_id).await?;
        sqlx::query("DELETE FROM account_rules WHERE account = $1")
            .bind(account.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        for rule in after {
            sqlx::query("INSERT INTO account_rules (account, name, rule) VALUES ($1, $2, $3)")
                .bind(account.as_str())
                .bind(&rule.name)
                .bind(json(rule)?)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    /// What change `change_id` replaced, if it changed rules: the account, the server's
    /// state and mailbroker's rules before it.
    pub async fn rule_change(
        &self,
        change_id: i64,
    ) -> Result<Option<(AccountId, RulesBefore, Vec<Rule>)>, Error> {
        let row: Option<(String, String, String)> = sqlx::query_as(
            "SELECT account, before, rules_before FROM rule_changes WHERE change_id = $1",
        )
        .bind(change_id)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        let Some((account, before, rules)) = row else {
            return Ok(None);
        };
        let rules = serde_json::from_str(&rules).map_err(bad)?;
        Ok(Some((account.parse()?, RulesBefore(before), rules)))
    }
}
