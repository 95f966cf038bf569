//! The authserv-ids each account trusts in `Authentication-Results` (`mailbroker_core::verdicts`).

use mailbroker_core::{AccountId, Error};

use super::{Store, db_error};

fn bad(e: serde_json::Error) -> Error {
    Error::internal(format!("an account's authserv-ids: {e}"))
}

impl Store {
    /// The authserv-ids `account` trusts (`account set --authserv-id`); empty when none set.
    pub async fn authserv_ids(&self, account: &AccountId) -> Result<Vec<String>, Error> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT authserv_ids FROM accounts WHERE id = $1")
                .bind(account.as_str())
                .fetch_optional(self.pool())
                .await
                .map_err(db_error)?;
        let Some((ids,)) = row else {
            return Err(Error::not_found(format!("no account {account}")));
        };
        serde_json::from_str(&ids).map_err(bad)
    }

    /// The authserv-ids whose verdicts `account` trusts: those set, else its provider's known
    /// ones (`mailbroker_core::known_authserv_ids`).
    pub async fn trusted_authserv_ids(&self, account: &AccountId) -> Result<Vec<String>, Error> {
        let set = self.authserv_ids(account).await?;
        if !set.is_empty() {
            return Ok(set);
        }
        let provider = self.account(account).await?.provider;
        Ok(mailbroker_core::known_authserv_ids(provider))
    }

    pub async fn set_authserv_ids(&self, account: &AccountId, ids: &[String]) -> Result<(), Error> {
        let json = serde_json::to_string(ids).map_err(bad)?;
        let done = sqlx::query("UPDATE accounts SET authserv_ids = $1 WHERE id = $2")
            .bind(json)
            .bind(account.as_str())
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        match done.rows_affected() {
            0 => Err(Error::not_found(format!("no account {account}"))),
            _ => Ok(()),
        }
    }
}
