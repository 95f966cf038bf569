//! A message's attachments as last listed from its source (`messages.parts`): what a provider
//! whose attachments carry no section number (Outlook) needs to read one part alone.

use mailbroker_core::{Attachment, Error};

use super::{Store, db_error};

impl Store {
    /// Keeps `parts` as message `id`'s attachments (its source was just read). Written only
    /// when they differ from those last kept: a read of a message writes nothing when its
    /// listing is as before. Says whether they were written.
    pub async fn remember_parts(&self, id: i64, parts: &[Attachment]) -> Result<bool, Error> {
        let json = serde_json::to_string(parts)
            .map_err(|e| Error::internal(format!("a message's attachments: {e}")))?;
        let done = sqlx::query(self.backend().pick(
            "UPDATE messages SET parts = $1 WHERE id = $2 AND parts IS NOT $1",
            "UPDATE messages SET parts = $1 WHERE id = $2 AND parts IS DISTINCT FROM $1",
        ))
        .bind(json)
        .bind(id)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listing_is_written_only_when_it_changed() {
        for (_dir, store) in crate::test_stores().await {
            crate::test_messages(&store, 7).await;
            let part = |name: &str| Attachment {
                part: "2".into(),
                name: Some(name.into()),
                content_type: "application/pdf".into(),
                size: 10,
            };
            let first = [part("a.pdf")];
            assert!(
                store.remember_parts(7, &first).await.unwrap(),
                "never listed"
            );
            assert!(!store.remember_parts(7, &first).await.unwrap(), "as before");
            let renamed = [part("b.pdf")];
            assert!(store.remember_parts(7, &renamed).await.unwrap(), "changed");
            assert_eq!(store.listed_parts(7).await.unwrap(), renamed.to_vec());
        }
    }
}
