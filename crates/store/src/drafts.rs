//! Drafts as the journal keeps them: for each change that saved one, where it was put.

use mailbroker_core::{AccountId, Error, PlacedDraft};

use super::{Store, db_error};

fn bad(e: serde_json::Error) -> Error {
    Error::internal(format!("a saved draft's record: {e}"))
}

impl Store {
    /// Records the draft change `change_id` saved as `placed`, and counts it applied.
    pub async fn record_draft(
        &self,
        change_id: i64,
        account: &AccountId,
        placed: &PlacedDraft,
    ) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        sqlx::query("INSERT INTO draft_changes (change_id, account, placed) VALUES ($1, $2, $3)")
            .bind(change_id)
            .bind(account.as_str())
            .bind(serde_json::to_string(placed).map_err(bad)?)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        applied_one(&mut tx, change_id).await?;
        tx.commit().await.map_err(db_error)
    }

    /// Counts a change of one thing (an undone draft) applied.
    pub async fn mark_applied(&self, change_id: i64) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        applied_one(&mut tx, change_id).await?;
        tx.commit().await.map_err(db_error)
    }

    /// The draft change `change_id` saved, if it is a change that saved one.
    pub async fn draft_change(
        &self,
        change_id: i64,
    ) -> Result<Option<(AccountId, PlacedDraft)>, Error> {
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT account, placed FROM draft_changes WHERE change_id = $1")
                .bind(change_id)
                .fetch_optional(self.pool())
                .await
                .map_err(db_error)?;
        let Some((account, placed)) = row else {
            return Ok(None);
        };
        Ok(Some((
            account.parse()?,
            serde_json::from_str(&placed).map_err(bad)?,
        )))
    }
}

/// Counts change `change_id`, a change of one thing (a rule change, a draft), applied: the
/// journal tallies it, and an undo finds it done.
pub(crate) async fn applied_one(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    change_id: i64,
) -> Result<(), Error> {
    sqlx::query("UPDATE changes SET applied = 1 WHERE id = $1")
        .bind(change_id)
        .execute(&mut **tx)
        .await
        .map(drop)
        .map_err(db_error)
}
