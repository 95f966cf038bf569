//! The console's single-use links and its sign-in sessions. Each is kept as the SHA-256
//! digest of its secret, never as itself: whoever reads the index (a `pg_dump`, a backup)
//! cannot sign in with one. Every process serving the index honours them, so a link printed
//! by `mailbroker console link` opens the console of any `serve` node.

use mailbroker_core::Error;
use sha2::{Digest, Sha256};

use super::{Store, db_error, now_secs};
use crate::util::random_hex;

fn digest(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// What a single-use link opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPurpose {
    /// A console session for the browser that opens it.
    SignIn,
    /// A passkey's enrollment (which signs the browser in too).
    Enroll,
}

impl LinkPurpose {
    fn as_str(self) -> &'static str {
        match self {
            LinkPurpose::SignIn => "sign-in",
            LinkPurpose::Enroll => "enroll",
        }
    }
}

/// A signed-in browser's session: the token every form of it carries, and its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    pub csrf: String,
    pub expires_at: i64,
}

/// A passkey a person enrolled: its public key and counter, as the WebAuthn library keeps
/// them (`credential`, JSON); never anything secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPasskey {
    pub id: i64,
    pub name: String,
    pub credential: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

fn link_refused() -> Error {
    Error::validation("this console link is not valid: it was used already, or it expired")
        .with_next_step("ask for a new one at a terminal: mailbroker console link")
}

impl Store {
    /// Forgets what expired: `statement` deletes the rows whose end is before its `$1`.
    async fn prune(&self, statement: &'static str) -> Result<(), Error> {
        sqlx::query(statement)
            .bind(now_secs())
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// A new single-use link's secret for `purpose`, valid `ttl_secs`.
    pub async fn issue_console_link(
        &self,
        purpose: LinkPurpose,
        ttl_secs: i64,
    ) -> Result<String, Error> {
        let secret = random_hex(32)?;
        let now = now_secs();
        self.prune("DELETE FROM console_links WHERE expires_at < $1")
            .await?;
        sqlx::query(
            "INSERT INTO console_links (digest, purpose, created_at, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(digest(&secret))
        .bind(purpose.as_str())
        .bind(now)
        .bind(now + ttl_secs)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(secret)
    }

    /// Uses the link `secret` for `purpose`, once: a used, expired, unknown or other
    /// purpose's link is refused, and whoever asks second of two at once is refused.
    pub async fn redeem_console_link(
        &self,
        secret: &str,
        purpose: LinkPurpose,
    ) -> Result<(), Error> {
        let used = sqlx::query(
            "UPDATE console_links SET used_at = $1
             WHERE digest = $2 AND purpose = $3 AND used_at IS NULL AND expires_at >= $1",
        )
        .bind(now_secs())
        .bind(digest(secret))
        .bind(purpose.as_str())
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        match used.rows_affected() {
            1 => Ok(()),
            _ => Err(link_refused()),
        }
    }

    /// Opens a session valid `ttl_secs`: its secret (the browser's cookie) and its record.
    pub async fn open_console_session(
        &self,
        ttl_secs: i64,
    ) -> Result<(String, ConsoleSession), Error> {
        let secret = random_hex(32)?;
        let session = ConsoleSession {
            csrf: random_hex(16)?,
            expires_at: now_secs() + ttl_secs,
        };
        self.prune("DELETE FROM console_sessions WHERE expires_at < $1")
            .await?;
        sqlx::query(
            "INSERT INTO console_sessions (digest, csrf, created_at, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(digest(&secret))
        .bind(&session.csrf)
        .bind(now_secs())
        .bind(session.expires_at)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok((secret, session))
    }

    /// The unexpired session whose secret is `secret`, if any.
    pub async fn console_session(&self, secret: &str) -> Result<Option<ConsoleSession>, Error> {
        let row: Option<(String, i64)> = sqlx::query_as(
            "SELECT csrf, expires_at FROM console_sessions WHERE digest = $1 AND expires_at >= $2",
        )
        .bind(digest(secret))
        .bind(now_secs())
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        Ok(row.map(|(csrf, expires_at)| ConsoleSession { csrf, expires_at }))
    }

    /// Ends the session whose secret is `secret` (signing out).
    pub async fn close_console_session(&self, secret: &str) -> Result<(), Error> {
        sqlx::query("DELETE FROM console_sessions WHERE digest = $1")
            .bind(digest(secret))
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }
}

impl Store {
    /// Whether the link `secret` is still good for `purpose`, without using it.
    pub async fn check_console_link(
        &self,
        secret: &str,
        purpose: LinkPurpose,
    ) -> Result<(), Error> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at FROM console_links
             WHERE digest = $1 AND purpose = $2 AND used_at IS NULL AND expires_at >= $3",
        )
        .bind(digest(secret))
        .bind(purpose.as_str())
        .bind(now_secs())
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        found.map(|_| ()).ok_or_else(link_refused)
    }

    /// Records a WebAuthn ceremony's `state` for `action`, owned by the link or session whose
    /// secret is `owner`; a new one for the same owner and action replaces it.
    pub async fn begin_ceremony(
        &self,
        owner: &str,
        action: &str,
        state: &str,
        ttl_secs: i64,
    ) -> Result<(), Error> {
        self.prune("DELETE FROM console_ceremonies WHERE expires_at < $1")
            .await?;
        sqlx::query(
            "INSERT INTO console_ceremonies (owner, action, state, expires_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (owner, action) DO UPDATE SET state = $3, expires_at = $4",
        )
        .bind(digest(owner))
        .bind(action)
        .bind(state)
        .bind(now_secs() + ttl_secs)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// Takes, once, the unexpired ceremony `owner` began for exactly `action`.
    pub async fn take_ceremony(&self, owner: &str, action: &str) -> Result<Option<String>, Error> {
        let taken: Option<(String, i64)> = sqlx::query_as(
            "DELETE FROM console_ceremonies WHERE owner = $1 AND action = $2
             RETURNING state, expires_at",
        )
        .bind(digest(owner))
        .bind(action)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        Ok(taken
            .filter(|(_, expires)| *expires >= now_secs())
            .map(|(state, _)| state))
    }

    /// Keeps a passkey a person enrolled under `name`.
    pub async fn add_passkey(&self, name: &str, credential: &str) -> Result<i64, Error> {
        sqlx::query_scalar(
            "INSERT INTO passkeys (name, credential, created_at) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(name)
        .bind(credential)
        .bind(now_secs())
        .fetch_one(self.pool())
        .await
        .map_err(db_error)
    }

    /// The enrolled passkeys, oldest first.
    pub async fn passkeys(&self) -> Result<Vec<StoredPasskey>, Error> {
        let rows: Vec<(i64, String, String, i64, Option<i64>)> = sqlx::query_as(
            "SELECT id, name, credential, created_at, last_used_at FROM passkeys ORDER BY id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(id, name, credential, created_at, last_used_at)| StoredPasskey {
                    id,
                    name,
                    credential,
                    created_at,
                    last_used_at,
                },
            )
            .collect())
    }

    /// Records a passkey's use: its credential as the library updated it (its counter).
    pub async fn used_passkey(&self, id: i64, credential: &str) -> Result<(), Error> {
        sqlx::query("UPDATE passkeys SET credential = $1, last_used_at = $2 WHERE id = $3")
            .bind(credential)
            .bind(now_secs())
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Removes passkey `id`; from then on it approves nothing.
    pub async fn remove_passkey(&self, id: i64) -> Result<(), Error> {
        let gone = sqlx::query("DELETE FROM passkeys WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        match gone.rows_affected() {
            0 => Err(Error::not_found(format!("no passkey {id}"))
                .with_next_step("list them: mailbroker console passkeys")),
            _ => Ok(()),
        }
    }
}

impl Store {
    /// A setting of the whole home (`home_settings`), if a person made it.
    pub async fn home_setting(&self, name: &str) -> Result<Option<String>, Error> {
        sqlx::query_scalar("SELECT value FROM home_settings WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await
            .map_err(db_error)
    }

    /// Makes a setting of the whole home, recording when and from where (`by`).
    pub async fn set_home_setting(&self, name: &str, value: &str, by: &str) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO home_settings (name, value, set_at, set_by) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET value = $2, set_at = $3, set_by = $4",
        )
        .bind(name)
        .bind(value)
        .bind(now_secs())
        .bind(by)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_link_opens_once_and_a_session_is_kept_only_as_a_digest() {
        for (_dir, store) in crate::test_stores().await {
            links_and_sessions_on(store).await;
        }
    }

    async fn links_and_sessions_on(store: Store) {
        let link = store
            .issue_console_link(LinkPurpose::SignIn, 300)
            .await
            .unwrap();
        assert_eq!(link.len(), 64);
        let refused =
            |r: Result<(), Error>| assert_eq!(r.unwrap_err().error_type(), "validation_error");
        refused(
            store
                .redeem_console_link("0".repeat(64).as_str(), LinkPurpose::SignIn)
                .await,
        );
        store
            .redeem_console_link(&link, LinkPurpose::SignIn)
            .await
            .unwrap();
        refused(store.redeem_console_link(&link, LinkPurpose::SignIn).await);
        let expired = store
            .issue_console_link(LinkPurpose::SignIn, -1)
            .await
            .unwrap();
        refused(
            store
                .redeem_console_link(&expired, LinkPurpose::SignIn)
                .await,
        );

        let (secret, session) = store.open_console_session(60).await.unwrap();
        assert_eq!(
            store.console_session(&secret).await.unwrap(),
            Some(session.clone())
        );
        assert_eq!(store.console_session(&session.csrf).await.unwrap(), None);
        let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT digest FROM console_sessions")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert!(
            stored
                .iter()
                .all(|d| d != secret.as_bytes() && d.len() == 32)
        );
        store.close_console_session(&secret).await.unwrap();
        assert_eq!(store.console_session(&secret).await.unwrap(), None);
        let (old, _) = store.open_console_session(-1).await.unwrap();
        assert_eq!(store.console_session(&old).await.unwrap(), None);

        // A ceremony is taken once, by its owner, for its action only.
        store
            .begin_ceremony("s1", "approve:a", "{1}", 60)
            .await
            .unwrap();
        store
            .begin_ceremony("s1", "approve:a", "{2}", 60)
            .await
            .unwrap();
        assert_eq!(store.take_ceremony("s2", "approve:a").await.unwrap(), None);
        assert_eq!(store.take_ceremony("s1", "approve:b").await.unwrap(), None);
        assert_eq!(
            store
                .take_ceremony("s1", "approve:a")
                .await
                .unwrap()
                .as_deref(),
            Some("{2}")
        );
        assert_eq!(store.take_ceremony("s1", "approve:a").await.unwrap(), None);
        store.begin_ceremony("s1", "late", "{}", -1).await.unwrap();
        assert_eq!(store.take_ceremony("s1", "late").await.unwrap(), None);
        let id = store.add_passkey("laptop", "{}").await.unwrap();
        store.used_passkey(id, "{\"n\":1}").await.unwrap();
        let kept = store.passkeys().await.unwrap();
        assert_eq!((kept.len(), kept[0].credential.as_str()), (1, "{\"n\":1}"));
        assert!(kept[0].last_used_at.is_some());
        store.remove_passkey(id).await.unwrap();
        assert!(store.remove_passkey(id).await.unwrap_err().is_not_found());

        assert_eq!(store.home_setting("approvals").await.unwrap(), None);
        store
            .set_home_setting("approvals", "passkey", "cli")
            .await
            .unwrap();
        store
            .set_home_setting("approvals", "terminal", "cli")
            .await
            .unwrap();
        assert_eq!(
            store.home_setting("approvals").await.unwrap().as_deref(),
            Some("terminal")
        );
    }
}
