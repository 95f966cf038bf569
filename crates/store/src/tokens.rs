//! Bearer tokens that open some accounts only (`mailbroker token create`), and which
//! accounts each journal entry and manifest touched, which decides what such a token sees of
//! them. A token is stored as its SHA-256 digest, never as itself: whoever reads the index
//! cannot present it.

use mailbroker_core::{AccountId, Error};
use sha2::{Digest, Sha256};

use super::{Store, db_error, now_secs};

/// A scoped token as `token list` shows it (never the token, nor its digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    pub name: String,
    /// The accounts it opens, in id order; never empty.
    pub accounts: Vec<AccountId>,
    pub allow_writes: bool,
    pub created_at: i64,
}

/// Accounts by journal entry or manifest id.
pub type Touched = std::collections::BTreeMap<i64, std::collections::BTreeSet<AccountId>>;

fn digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

type TokenRow = (String, String, i64, i64);

fn token_of((name, accounts, allow_writes, created_at): TokenRow) -> Result<AccessToken, Error> {
    let ids: Vec<String> = serde_json::from_str(&accounts)
        .map_err(|e| Error::internal(format!("index: token {name}: accounts: {e}")))?;
    Ok(AccessToken {
        accounts: ids
            .iter()
            .map(|a| a.parse())
            .collect::<Result<_, Error>>()?,
        name,
        allow_writes: allow_writes != 0,
        created_at,
    })
}

impl Store {
    /// Records a token under `name` for `accounts` (each must exist).
    pub async fn add_access_token(
        &self,
        name: &str,
        token: &str,
        accounts: &[AccountId],
        allow_writes: bool,
    ) -> Result<AccessToken, Error> {
        let mut ids: Vec<AccountId> = accounts.to_vec();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Err(Error::validation("a token must open at least one account")
                .with_next_step("name them: --accounts ID[,ID…]"));
        }
        for id in &ids {
            self.account(id).await?;
        }
        let names: Vec<&str> = ids.iter().map(AccountId::as_str).collect();
        let added = sqlx::query(
            "INSERT INTO access_tokens (name, digest, accounts, allow_writes, created_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(digest(token))
        .bind(serde_json::json!(names).to_string())
        .bind(i64::from(allow_writes))
        .bind(now_secs())
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        if added.rows_affected() == 0 {
            return Err(
                Error::validation(format!("a token named {name:?} exists already")).with_next_step(
                    format!("choose another name, or run: mailbroker token revoke {name}"),
                ),
            );
        }
        self.access_token_named(name).await
    }

    async fn access_token_named(&self, name: &str) -> Result<AccessToken, Error> {
        let row: Option<TokenRow> = sqlx::query_as(
            "SELECT name, accounts, allow_writes, created_at FROM access_tokens WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        row.map(token_of).transpose()?.ok_or_else(|| {
            Error::not_found(format!("no token named {name:?}"))
                .with_next_step("run: mailbroker token list")
        })
    }

    /// Every scoped token, by name.
    pub async fn access_tokens(&self) -> Result<Vec<AccessToken>, Error> {
        let rows: Vec<TokenRow> = sqlx::query_as(
            "SELECT name, accounts, allow_writes, created_at FROM access_tokens ORDER BY name",
        )
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        rows.into_iter().map(token_of).collect()
    }

    /// The token a bearer value is, if it is one of ours. Looked up by digest: equal
    /// digests of a 256-bit random token leak nothing a timing could use.
    pub async fn access_token(&self, presented: &str) -> Result<Option<AccessToken>, Error> {
        let row: Option<TokenRow> = sqlx::query_as(
            "SELECT name, accounts, allow_writes, created_at FROM access_tokens WHERE digest = $1",
        )
        .bind(digest(presented))
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        row.map(token_of).transpose()
    }

    /// The accounts each journal entry touched (`changes`) or each manifest stages
    /// (`manifests`), by id: what decides whether a scoped caller sees it.
    pub async fn accounts_of(
        &self,
        changes: &[i64],
        manifests: &[i64],
    ) -> Result<(Touched, Touched), Error> {
        let read = |table: &'static str, column: &'static str, ids: &[i64]| {
            let ids = serde_json::json!(ids).to_string();
            async move {
                // Table and column are this function's own constants, never input.
                let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT DISTINCT {column}, account_id FROM {table} \
                     WHERE {column} IN (SELECT CAST(value AS BIGINT) FROM json_each($1))"
                )))
                .bind(ids)
                .fetch_all(self.pool())
                .await
                .map_err(db_error)?;
                let mut out = Touched::new();
                for (id, account) in rows {
                    out.entry(id).or_default().insert(account.parse()?);
                }
                Ok::<_, Error>(out)
            }
        };
        Ok((
            read("change_items", "change_id", changes).await?,
            read("manifest_items", "manifest_id", manifests).await?,
        ))
    }

    /// Removes the token named `name`: from the next request on, it opens nothing.
    pub async fn revoke_access_token(&self, name: &str) -> Result<AccessToken, Error> {
        let token = self.access_token_named(name).await?;
        sqlx::query("DELETE FROM access_tokens WHERE name = $1")
            .bind(name)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(token)
    }
}
