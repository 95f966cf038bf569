//! mailbroker's own OAuth authorization server, as the index keeps it: clients (registered,
//! or known by their metadata document), authorization requests waiting for the person's
//! consent, grants (the accounts and read or read-write a person approved for one client),
//! and the grant's codes and tokens, each kept only as its SHA-256 digest. A code is used
//! once; a refresh token is used once and replaced. A code or refresh token presented twice
//! ends its grant: someone else holds it.

use mailbroker_core::{AccountId, Error};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::sql::text_column;
use super::{Store, db_error, now_secs};

fn digest(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// How a client made itself known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    /// Dynamic Client Registration (RFC 7591): the id is ours.
    Registered,
    /// A client id metadata document: the id is the https URL of its JSON.
    Document,
}

text_column!(ClientKind {
    Registered = "registered",
    Document = "document",
});

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub kind: ClientKind,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub created_at: i64,
    /// When its document was last read (its registration, for a registered one).
    pub fetched_at: i64,
}

/// An authorization request waiting for the person's decision in the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRequest {
    pub id: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub resource: String,
    pub created_at: i64,
}

/// What a person approved for a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: i64,
    pub client_id: String,
    pub accounts: Vec<AccountId>,
    pub allow_writes: bool,
    pub resource: String,
    pub created_at: i64,
}

/// How long an authorization request waits for the person, a code for its client, an access
/// token and a refresh token live.
pub const REQUEST_SECS: i64 = 600;
pub const CODE_SECS: i64 = 300;
pub const ACCESS_SECS: i64 = 3600;
pub const REFRESH_SECS: i64 = 30 * 24 * 3600;

type ClientRow = (String, ClientKind, String, String, i64, i64);
type GrantRow = (i64, String, String, i64, String, i64);

fn client_of((client_id, kind, name, uris, created_at, fetched_at): ClientRow) -> OAuthClient {
    OAuthClient {
        client_id,
        kind,
        name,
        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
        created_at,
        fetched_at,
    }
}

fn grant_of(
    (id, client_id, accounts, writes, resource, created_at): GrantRow,
) -> Result<Grant, Error> {
    let ids: Vec<String> = serde_json::from_str(&accounts)
        .map_err(|e| Error::internal(format!("index: grant {id}: accounts: {e}")))?;
    Ok(Grant {
        id,
        client_id,
        accounts: ids
            .iter()
            .map(|a| a.parse())
            .collect::<Result<_, Error>>()?,
        allow_writes: writes != 0,
        resource,
        created_at,
    })
}

const GRANT_COLUMNS: &str = "id, client_id, accounts, allow_writes, resource, created_at";

/// A code or token presented that the index does not hold as live.
fn invalid_grant(what: &str) -> Error {
    Error::auth_required(format!(
        "the {what} is not valid (unknown, used, expired or revoked)"
    ))
    .with_next_step("start the sign-in again")
}

impl Store {
    /// Records a client, or its document read again.
    pub async fn put_oauth_client(&self, c: &OAuthClient) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, kind, name, redirect_uris, created_at, fetched_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (client_id) DO UPDATE SET name = excluded.name,
               redirect_uris = excluded.redirect_uris, fetched_at = excluded.fetched_at",
        )
        .bind(&c.client_id)
        .bind(c.kind)
        .bind(&c.name)
        .bind(serde_json::json!(c.redirect_uris).to_string())
        .bind(c.created_at)
        .bind(c.fetched_at)
        .execute(self.pool())
        .await
        .map_err(db_error)
        .map(drop)
    }

    pub async fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>, Error> {
        let row: Option<ClientRow> = sqlx::query_as(
            "SELECT client_id, kind, name, redirect_uris, created_at, fetched_at
             FROM oauth_clients WHERE client_id = $1",
        )
        .bind(client_id)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        Ok(row.map(client_of))
    }

    pub async fn add_auth_request(&self, r: &AuthRequest) -> Result<(), Error> {
        // Requests nobody decided in time go, so unanswered ones do not pile up.
        sqlx::query("DELETE FROM oauth_requests WHERE created_at <= $1")
            .bind(now_secs() - REQUEST_SECS)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO oauth_requests (id, client_id, redirect_uri, state, code_challenge,
               resource, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&r.id)
        .bind(&r.client_id)
        .bind(&r.redirect_uri)
        .bind(&r.state)
        .bind(&r.code_challenge)
        .bind(&r.resource)
        .bind(r.created_at)
        .execute(self.pool())
        .await
        .map_err(db_error)
        .map(drop)
    }

    /// The waiting request `id`, if it has not expired.
    pub async fn auth_request(&self, id: &str) -> Result<Option<AuthRequest>, Error> {
        type Row = (String, String, String, Option<String>, String, String, i64);
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, client_id, redirect_uri, state, code_challenge, resource, created_at
             FROM oauth_requests WHERE id = $1 AND created_at > $2",
        )
        .bind(id)
        .bind(now_secs() - REQUEST_SECS)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        Ok(row.map(
            |(id, client_id, redirect_uri, state, code_challenge, resource, created_at)| {
                AuthRequest {
                    id,
                    client_id,
                    redirect_uri,
                    state,
                    code_challenge,
                    resource,
                    created_at,
                }
            },
        ))
    }

    /// Ends request `id` (decided either way); whether it was still waiting.
    pub async fn end_auth_request(&self, id: &str) -> Result<bool, Error> {
        let gone = sqlx::query("DELETE FROM oauth_requests WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(gone.rows_affected() == 1)
    }

    /// Whether the person approved anything for `client_id` before.
    pub async fn oauth_client_seen(&self, client_id: &str) -> Result<bool, Error> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM oauth_grants WHERE client_id = $1")
            .bind(client_id)
            .fetch_one(self.pool())
            .await
            .map_err(db_error)?;
        Ok(n > 0)
    }

    /// The person approved `request` for `accounts`: a grant, and its code (kept as a
    /// digest) for the client to redeem.
    pub async fn grant_code(
        &self,
        request: &AuthRequest,
        accounts: &[AccountId],
        allow_writes: bool,
        code: &str,
    ) -> Result<i64, Error> {
        let names: Vec<&str> = accounts.iter().map(AccountId::as_str).collect();
        let now = now_secs();
        let mut tx = self.pool().begin().await.map_err(db_error)?;
        let grant: i64 = sqlx::query_scalar(
            "INSERT INTO oauth_grants (client_id, accounts, allow_writes, resource, created_at)
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&request.client_id)
        .bind(serde_json::json!(names).to_string())
        .bind(i64::from(allow_writes))
        .bind(&request.resource)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO oauth_codes (digest, grant_id, redirect_uri, code_challenge, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(digest(code))
        .bind(grant)
        .bind(&request.redirect_uri)
        .bind(&request.code_challenge)
        .bind(now + CODE_SECS)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(grant)
    }

    /// Takes `code` (once): its grant, the redirect URI and PKCE challenge it was issued
    /// for. A code presented again ends its grant.
    pub async fn redeem_code(&self, code: &str) -> Result<(Grant, String, String), Error> {
        type Row = (i64, String, String, i64, i64);
        let row: Option<Row> = sqlx::query_as(
            "SELECT grant_id, redirect_uri, code_challenge, expires_at, used
             FROM oauth_codes WHERE digest = $1",
        )
        .bind(digest(code))
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        let Some((grant_id, redirect_uri, challenge, expires_at, used)) = row else {
            return Err(invalid_grant("code"));
        };
        if used != 0 {
            self.revoke_grant(grant_id).await?;
            return Err(invalid_grant("code"));
        }
        let taken = sqlx::query("UPDATE oauth_codes SET used = 1 WHERE digest = $1 AND used = 0")
            .bind(digest(code))
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        if taken.rows_affected() != 1 || expires_at <= now_secs() {
            return Err(invalid_grant("code"));
        }
        let grant = self
            .live_grant(grant_id)
            .await?
            .ok_or_else(|| invalid_grant("code"))?;
        Ok((grant, redirect_uri, challenge))
    }

    async fn live_grant(&self, id: i64) -> Result<Option<Grant>, Error> {
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE id = $1 AND revoked_at IS NULL"
        );
        let row: Option<GrantRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .map_err(db_error)?;
        row.map(grant_of).transpose()
    }

    /// Keeps a new access and refresh token of `grant` (as digests).
    pub async fn add_grant_tokens(
        &self,
        grant: i64,
        access: &str,
        refresh: &str,
    ) -> Result<(), Error> {
        let now = now_secs();
        for (secret, kind, life) in [
            (access, "access", ACCESS_SECS),
            (refresh, "refresh", REFRESH_SECS),
        ] {
            sqlx::query(
                "INSERT INTO oauth_tokens (digest, grant_id, kind, expires_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(digest(secret))
            .bind(grant)
            .bind(kind)
            .bind(now + life)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }

    /// The live grant a token of `kind` belongs to, and whether it was used already.
    async fn token_grant(&self, secret: &str, kind: &str) -> Result<Option<(i64, bool)>, Error> {
        let row: Option<(i64, i64)> = sqlx::query_as(
            "SELECT grant_id, used FROM oauth_tokens
             WHERE digest = $1 AND kind = $2 AND expires_at > $3",
        )
        .bind(digest(secret))
        .bind(kind)
        .bind(now_secs())
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)?;
        Ok(row.map(|(g, used)| (g, used != 0)))
    }

    /// Takes refresh token `secret` (once): its grant. One presented again ends its grant.
    pub async fn take_refresh(&self, secret: &str) -> Result<Grant, Error> {
        let Some((grant, used)) = self.token_grant(secret, "refresh").await? else {
            return Err(invalid_grant("refresh token"));
        };
        let taken = sqlx::query("UPDATE oauth_tokens SET used = 1 WHERE digest = $1 AND used = 0")
            .bind(digest(secret))
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        if used || taken.rows_affected() != 1 {
            self.revoke_grant(grant).await?;
            return Err(invalid_grant("refresh token"));
        }
        self.live_grant(grant)
            .await?
            .ok_or_else(|| invalid_grant("refresh token"))
    }

    /// The live grant an access token opens, if it is one.
    pub async fn grant_of_access(&self, secret: &str) -> Result<Option<Grant>, Error> {
        match self.token_grant(secret, "access").await? {
            Some((grant, _)) => self.live_grant(grant).await,
            None => Ok(None),
        }
    }

    /// Every live grant, oldest first, each with its client's name.
    pub async fn grants(&self) -> Result<Vec<(Grant, String)>, Error> {
        let rows: Vec<(i64, String, String, i64, String, i64, String)> = sqlx::query_as(
            "SELECT g.id, g.client_id, g.accounts, g.allow_writes, g.resource, g.created_at,
                    COALESCE(c.name, g.client_id)
             FROM oauth_grants g LEFT JOIN oauth_clients c ON c.client_id = g.client_id
             WHERE g.revoked_at IS NULL ORDER BY g.id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        (rows.into_iter())
            .map(|(id, client, accounts, w, resource, at, name)| {
                Ok((grant_of((id, client, accounts, w, resource, at))?, name))
            })
            .collect()
    }

    /// Ends grant `id` and every token of it, from the next request on; whether it was live.
    pub async fn revoke_grant(&self, id: i64) -> Result<bool, Error> {
        let ended = sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(id)
        .bind(now_secs())
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        sqlx::query("DELETE FROM oauth_tokens WHERE grant_id = $1")
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(ended.rows_affected() == 1)
    }
}
