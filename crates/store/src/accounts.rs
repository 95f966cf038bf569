//! Accounts, their secrets and their mailboxes.

use std::collections::HashMap;

use mailbroker_core::{
    AccountId, Capabilities, Error, MailboxCursor, ProviderKind, Role, RoleSource,
};

use super::{Backend, Store, db_error, now_secs};
use crate::keyring::SecretStore;

/// An account as stored. `settings` is the provider's own JSON; secrets are not here.
#[derive(Debug, Clone)]
pub struct AccountRecord {
    pub id: AccountId,
    pub provider: ProviderKind,
    pub email: Option<String>,
    pub settings: serde_json::Value,
    pub capabilities: Capabilities,
    pub created_at: i64,
    pub last_sync_at: Option<i64>,
    /// The provider's account-wide sync cursor (opaque; see `SyncSink::account_cursor`).
    pub sync_cursor: Option<String>,
    /// The route the person chose for when this account's own is unavailable.
    pub fallback: Option<Fallback>,
    /// Since when a person allowed `delete-staged --yes` to delete this account's mail for
    /// good with nobody at a terminal (`account set --unattended-deletions`).
    pub unattended_deletions_since: Option<i64>,
}

/// A fallback route: which provider's adapter carries it, and its settings (no secret).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fallback {
    pub provider: ProviderKind,
    pub settings: serde_json::Value,
}

#[derive(Debug, Clone)]
pub struct MailboxRecord {
    pub id: i64,
    pub name: String,
    pub role: Option<Role>,
    /// `server` (the server marks it) or `name` (guessed from a well-known name).
    pub role_source: Option<RoleSource>,
    pub selectable: bool,
    pub messages: i64,
    pub unread: i64,
}

type AccountRow = (
    String,
    String,
    Option<String>,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

fn account_of(row: AccountRow) -> Result<AccountRecord, Error> {
    let (
        id,
        provider,
        email,
        settings,
        capabilities,
        created_at,
        last_sync_at,
        sync_cursor,
        fallback,
        unattended_deletions_since,
    ) = row;
    let fallback = match fallback {
        Some(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| Error::internal(format!("account {id}: bad fallback json: {e}")))?,
        ),
        None => None,
    };
    Ok(AccountRecord {
        id: id.parse()?,
        provider: provider.parse()?,
        email,
        settings: serde_json::from_str(&settings)
            .map_err(|e| Error::internal(format!("account {id}: bad settings json: {e}")))?,
        capabilities: serde_json::from_str(&capabilities)
            .map_err(|e| Error::internal(format!("account {id}: bad capabilities json: {e}")))?,
        created_at,
        last_sync_at,
        sync_cursor,
        fallback,
        unattended_deletions_since,
    })
}

const ACCOUNT_COLUMNS: &str =
    "SELECT id, provider, email, settings, capabilities, created_at, last_sync_at, sync_cursor,
       fallback, unattended_deletions_since
     FROM accounts";

impl AccountRecord {
    /// What the account's adapter is told of it.
    pub fn info(&self) -> mailbroker_core::AccountInfo<'_> {
        mailbroker_core::AccountInfo {
            id: &self.id,
            settings: &self.settings,
            capabilities: &self.capabilities,
            cursor: self.sync_cursor.as_deref(),
        }
    }
}

impl Store {
    /// Stores a new account, its secret and its mailboxes in one transaction: either all of it
    /// is there afterwards or none of it.
    pub async fn add_account(
        &self,
        account: &AccountRecord,
        secret: Option<(&str, &str)>,
        mailboxes: &[mailbroker_core::MailboxInfo],
    ) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        let exists: Option<String> = sqlx::query_scalar("SELECT id FROM accounts WHERE id = $1")
            .bind(account.id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
        if exists.is_some() {
            return Err(
                Error::validation(format!("account {} already exists", account.id))
                    .with_next_step(format!("run: mailbroker account remove {}", account.id)),
            );
        }
        sqlx::query(
            "INSERT INTO accounts (id, provider, email, settings, capabilities, created_at,
               sync_cursor) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(account.id.as_str())
        .bind(account.provider.as_str())
        .bind(account.email.as_deref())
        .bind(account.settings.to_string())
        .bind(
            serde_json::to_string(&account.capabilities)
                .map_err(|e| Error::internal(e.to_string()))?,
        )
        .bind(account.created_at)
        .bind(account.sync_cursor.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let kept = match secret {
            Some((kind, value)) => {
                remember(value);
                let shared = self.backend == Backend::Postgres;
                let label = secret_label(&account.id, kind);
                Some(crate::keyring::put(value, &label, shared).await?)
            }
            None => None,
        };
        let written = async {
            if let (Some((kind, _)), Some((store, kept))) = (secret, &kept) {
                sqlx::query(
                    "INSERT INTO credentials (account_id, kind, secret, store) VALUES ($1, $2, $3, $4)",
                )
                .bind(account.id.as_str())
                .bind(kind)
                .bind(kept)
                .bind(store.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            }
            for mb in mailboxes {
                super::sink::upsert_mailbox(&mut tx, account.id.as_str(), mb).await?;
            }
            tx.commit().await.map_err(db_error)
        }
        .await;
        if let (Err(_), Some((SecretStore::Keyring, kept))) = (&written, &kept) {
            // Nothing of the account was stored: neither is its secret.
            let _ = crate::keyring::delete(kept).await;
        }
        written
    }

    /// Allows (or stops) permanent deletions of the account's mail with nobody at a
    /// terminal, and journals who changed it and when, in one transaction.
    pub async fn set_unattended_deletions(
        &self,
        id: &AccountId,
        allowed: bool,
        origin: &str,
    ) -> Result<(), Error> {
        let now = now_secs();
        let mut tx = self.write_tx().await?;
        let done = sqlx::query("UPDATE accounts SET unattended_deletions_since = $1 WHERE id = $2")
            .bind(allowed.then_some(now))
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(format!("no account {id}"))
                .with_next_step("run: mailbroker account list"));
        }
        sqlx::query(
            "INSERT INTO account_settings_log (account_id, at, setting, value, origin)
             VALUES ($1, $2, 'unattended_deletions', $3, $4)",
        )
        .bind(id.as_str())
        .bind(now)
        .bind(if allowed { "allowed" } else { "refused" })
        .bind(origin)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    /// Sets (or, with `None`, removes) the account's fallback route.
    pub async fn set_fallback(
        &self,
        id: &AccountId,
        fallback: Option<&Fallback>,
    ) -> Result<(), Error> {
        let text = fallback
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| Error::internal(e.to_string()))?;
        let done = sqlx::query("UPDATE accounts SET fallback = $1 WHERE id = $2")
            .bind(text)
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        match done.rows_affected() {
            0 => Err(Error::not_found(format!("no account {id}"))
                .with_next_step("run: mailbroker account list")),
            _ => Ok(()),
        }
    }

    pub async fn accounts(&self) -> Result<Vec<AccountRecord>, Error> {
        let rows: Vec<AccountRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{ACCOUNT_COLUMNS} ORDER BY id"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        self.read_accounts(rows.len());
        rows.into_iter().map(account_of).collect()
    }

    pub async fn account(&self, id: &AccountId) -> Result<AccountRecord, Error> {
        let row: Option<AccountRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{ACCOUNT_COLUMNS} WHERE id = $1"
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        self.read_accounts(1);
        match row {
            Some(row) => account_of(row),
            None => Err(Error::not_found(format!("no account {id}"))
                .with_next_step("run: mailbroker account list")),
        }
    }

    /// Where an account's secret of one kind rests, and what the index keeps of it (the
    /// secret, or its keyring entry's name).
    async fn stored_secret(
        &self,
        id: &AccountId,
        kind: &str,
    ) -> Result<Option<(SecretStore, String)>, Error> {
        let row: Option<(String, String)> = sqlx::query_as(
            "SELECT store, secret FROM credentials WHERE account_id = $1 AND kind = $2",
        )
        .bind(id.as_str())
        .bind(kind)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(row.map(|(store, kept)| (SecretStore::parse(&store), kept)))
    }

    /// Which store holds an account's secrets (the first kind stored), for `account show`.
    pub async fn secret_store(&self, id: &AccountId) -> Result<Option<SecretStore>, Error> {
        let store: Option<String> = sqlx::query_scalar(
            "SELECT store FROM credentials WHERE account_id = $1 ORDER BY kind LIMIT 1",
        )
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(store.as_deref().map(SecretStore::parse))
    }

    /// The secret of one kind (`password`, `refresh_token`) for an account, from wherever it
    /// rests.
    pub async fn secret(&self, id: &AccountId, kind: &str) -> Result<String, Error> {
        let secret = match self.stored_secret(id, kind).await? {
            Some((SecretStore::Keyring, name)) => Some(crate::keyring::get(&name).await?),
            Some((SecretStore::Index, secret)) => Some(secret),
            Some((SecretStore::Sealed, sealed)) => {
                Some(crate::sealed::open(&secret_label(id, kind), &sealed)?)
            }
            None => None,
        };
        secret.as_deref().map(remember);
        secret.ok_or_else(|| {
            Error::auth_required(format!("account {id} has no stored {kind}")).with_next_step(
                format!("run: mailbroker account remove {id}, then add it again"),
            )
        })
    }

    /// Whether a new account's secret could be kept: in a shared database only sealed, so
    /// without a key file an account is refused before any sign-in.
    pub fn can_keep_secrets(&self) -> Result<(), Error> {
        if self.backend == Backend::Postgres && crate::sealed::key()?.is_none() {
            return Err(crate::sealed::shared_needs_key());
        }
        Ok(())
    }

    /// Replaces an account's secret of one kind (a refreshed or re-authorized token), where
    /// it rests.
    pub async fn set_secret(&self, id: &AccountId, kind: &str, secret: &str) -> Result<(), Error> {
        remember(secret);
        let (store, kept) = match self.stored_secret(id, kind).await? {
            Some((SecretStore::Keyring, name)) => {
                crate::keyring::replace(&name, secret).await?;
                return Ok(());
            }
            // In the index: sealed when a key is given (so a refreshed token of an index
            // that had it in the clear is sealed from now on), never unsealed.
            Some((store @ (SecretStore::Index | SecretStore::Sealed), _)) => {
                let label = secret_label(id, kind);
                match crate::sealed::key()? {
                    Some(key) => (
                        SecretStore::Sealed,
                        crate::sealed::seal(&key, &label, secret)?,
                    ),
                    None if store == SecretStore::Sealed => {
                        return Err(crate::sealed::no_key(&label));
                    }
                    None if self.backend == Backend::Postgres => {
                        return Err(crate::sealed::shared_needs_key());
                    }
                    None => (SecretStore::Index, secret.to_string()),
                }
            }
            None => {
                let shared = self.backend == Backend::Postgres;
                crate::keyring::put(secret, &secret_label(id, kind), shared).await?
            }
        };
        sqlx::query(
            "INSERT INTO credentials (account_id, kind, secret, store) VALUES ($1, $2, $3, $4)
             ON CONFLICT (account_id, kind) DO UPDATE
             SET secret = excluded.secret, store = excluded.store",
        )
        .bind(id.as_str())
        .bind(kind)
        .bind(kept)
        .bind(store.as_str())
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// Removes an account with its secrets (from the keyring too), mailboxes and messages
    /// (by cascade). A keyring that cannot be reached does not keep the account: its rows go,
    /// and the names of the keyring entries left behind are returned for the person to
    /// remove.
    pub async fn remove_account(&self, id: &AccountId) -> Result<Vec<String>, Error> {
        let in_keyring: Vec<String> = sqlx::query_scalar(
            "SELECT secret FROM credentials WHERE account_id = $1 AND store = 'keyring'",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let done = sqlx::query("DELETE FROM accounts WHERE id = $1")
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(format!("no account {id}"))
                .with_next_step("run: mailbroker account list"));
        }
        let mut left = Vec::new();
        for name in in_keyring {
            if let Err(e) = crate::keyring::delete(&name).await {
                tracing::debug!(error = %e, "keyring entry left");
                left.push(name);
            }
        }
        Ok(left)
    }

    pub async fn mark_synced(&self, id: &AccountId) -> Result<(), Error> {
        sqlx::query("UPDATE accounts SET last_sync_at = $1 WHERE id = $2")
            .bind(now_secs())
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    pub async fn set_capabilities(&self, id: &AccountId, caps: &Capabilities) -> Result<(), Error> {
        let caps = serde_json::to_string(caps).map_err(|e| Error::internal(e.to_string()))?;
        sqlx::query("UPDATE accounts SET capabilities = $1 WHERE id = $2")
            .bind(caps)
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    pub async fn set_sync_cursor(&self, id: &AccountId, cursor: &str) -> Result<(), Error> {
        sqlx::query("UPDATE accounts SET sync_cursor = $1 WHERE id = $2")
            .bind(cursor)
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Where the last sync of each mailbox stopped, for mailboxes synced at least once.
    pub async fn cursors(&self, id: &AccountId) -> Result<Vec<(String, MailboxCursor)>, Error> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, cursor FROM mailboxes WHERE account_id = $1 AND cursor != ''",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(name, cursor)| (name, MailboxCursor::new(cursor)))
            .collect())
    }

    /// Mailboxes of an account with message counts.
    pub async fn mailboxes(&self, id: &AccountId) -> Result<Vec<MailboxRecord>, Error> {
        type Row = (i64, String, Option<String>, Option<String>, i64, i64, i64);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT b.id, b.name, b.role, b.role_source, b.selectable,
                    (SELECT count(*) FROM messages m WHERE m.mailbox_id = b.id),
                    (SELECT count(*) FROM messages m JOIN message_state s ON s.id = m.id
                       WHERE m.mailbox_id = b.id AND s.is_read = 0)
             FROM mailboxes b WHERE b.account_id = $1 ORDER BY b.name",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(mid, name, role, source, selectable, messages, unread)| MailboxRecord {
                    id: mid,
                    name,
                    role: role.as_deref().and_then(Role::parse),
                    role_source: source.as_deref().and_then(RoleSource::parse),
                    selectable: selectable != 0,
                    messages,
                    unread,
                },
            )
            .collect())
    }

    /// How many messages each account has indexed, from the narrow (mailbox, uid) index
    /// alone: `mailboxes` also counts the unread, which reads every message's state.
    pub async fn message_counts(&self) -> Result<HashMap<String, i64>, Error> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT b.account_id, (SELECT count(*) FROM messages m WHERE m.mailbox_id = b.id)
             FROM mailboxes b",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut counts = HashMap::new();
        for (account, n) in rows {
            *counts.entry(account).or_insert(0) += n;
        }
        Ok(counts)
    }

    /// The tags of an account, with how many messages carry each, most used first; a tag
    /// mailbroker added or removed that no message carries any more is listed with 0.
    pub async fn tag_catalog(&self, id: &AccountId) -> Result<Vec<(String, i64)>, Error> {
        sqlx::query_as(
            "SELECT tag, sum(n) AS total FROM (
               SELECT t.tag, 1 AS n FROM message_tags t JOIN messages m ON m.id = t.message_id
               JOIN mailboxes b ON b.id = m.mailbox_id WHERE b.account_id = $1
               UNION ALL SELECT tag COLLATE NOCASE, 0 FROM known_tags WHERE account_id = $1)
               AS tags
             GROUP BY tag ORDER BY total DESC, tag",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }
}

/// What a sealed secret is bound to: its account and kind.
fn secret_label(id: &AccountId, kind: &str) -> String {
    format!("account {id} ({kind})")
}

/// Registers a secret for log redaction as it passes the store: its text and, when it is a
/// JSON object (tokens), each of its string values. The store knows no provider's shape.
fn remember(secret: &str) {
    mailbroker_core::secrets::register(secret);
    if let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(secret) {
        for value in fields.values().filter_map(|v| v.as_str()) {
            mailbroker_core::secrets::register(value);
        }
    }
}
