//! A message's attachments as last listed from its source (`messages.parts`): what a provider
//! whose attachments carry no section number (Outlook) needs to read one part alone.

use mailbroker_core::{Attachment, Error};

use super::{Store, db_error};

impl Store {
    /// Keeps `parts` as message `id`'s attachments (its source was just read).
    pub async fn remember_parts(&self, id: i64, parts: &[Attachment]) -> Result<(), Error> {
        let json = serde_json::to_string(parts)
            .map_err(|e| Error::internal(format!("a message's attachments: {e}")))?;
        sqlx::query("UPDATE messages SET parts = $1 WHERE id = $2")
            .bind(json)
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Message `id`'s attachments as last listed; empty when never listed (or unreadable).
    pub async fn listed_parts(&self, id: i64) -> Result<Vec<Attachment>, Error> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT parts FROM messages WHERE id = $1")
                .bind(id)
                .fetch_optional(self.pool())
                .await
                .map_err(db_error)?;
        let listed = row.and_then(|(parts,)| parts);
        Ok((listed.as_deref())
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default())
    }
}
