//! Confirmations a person gives outside the assistant's reach (`approvals`): a write that
//! needs confirming is recorded under a token by its dry run, approved by the person with
//! `mailbroker approve TOKEN` or in the console, and runs once with that token. The console
//! names a waiting write by its page (a digest of the token), so an address handed to an
//! assistant never carries the token itself.

use mailbroker_core::Error;
use sha2::{Digest, Sha256};

use super::sql::text_column;
use super::{Store, db_error, now_secs};

/// What an approval token stands for, as the person is shown it.
#[derive(Debug, Clone)]
pub struct Approval {
    pub token: String,
    pub description: serde_json::Value,
    pub expires_at: i64,
    pub approved_at: Option<i64>,
    pub used_at: Option<i64>,
    pub declined_at: Option<i64>,
    /// How the person approved it, once they did.
    pub approved_by: Option<ApprovedBy>,
}

/// How a person gave their yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovedBy {
    /// `mailbroker approve`: a terminal, which a program with a shell can also present.
    Terminal,
    /// A passkey's assertion in the console.
    Passkey,
}

text_column!(ApprovedBy {
    Terminal = "terminal",
    Passkey = "passkey",
});

/// What a confirm token needs before it runs a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// Nothing more: the token alone (`--confirm-with-token`).
    Token,
    /// A person's yes, given at a terminal or in the console.
    Person,
    /// A passkey's yes in the console, and no other.
    Passkey,
}

/// Where a waiting write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Waiting,
    Approved,
    Declined,
    /// Approved, and the write it stands for has run (or is running).
    Used,
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Waiting => "waiting",
            Decision::Approved => "approved",
            Decision::Declined => "declined",
            Decision::Used => "used",
            Decision::Expired => "expired",
        }
    }
}

impl Approval {
    /// The console page's name for `token`: a digest, so the page's address can be given to
    /// an assistant, which can neither approve with it nor learn the token from it.
    pub fn page_of(token: &str) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"mailbroker console page\0");
        hasher.update(token.as_bytes());
        hex::encode(&hasher.finalize()[..16])
    }

    pub fn page(&self) -> String {
        Approval::page_of(&self.token)
    }

    pub fn decision(&self) -> Decision {
        match (self.used_at, self.declined_at, self.approved_at) {
            (Some(_), _, _) => Decision::Used,
            (None, Some(_), _) => Decision::Declined,
            (None, None, Some(_)) => Decision::Approved,
            _ if self.expires_at < now_secs() => Decision::Expired,
            _ => Decision::Waiting,
        }
    }
}

fn unknown(token: &str) -> Error {
    Error::not_found(format!("no confirmation {token:?} is waiting"))
        .with_next_step("check the token the assistant showed; it is valid for ten minutes")
}

type ApprovalRow = (
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<ApprovedBy>,
);

impl Store {
    /// Records a write that needs confirming under `token`, bound to `binding`.
    pub async fn issue_approval(
        &self,
        token: &str,
        binding: &str,
        description: &serde_json::Value,
        ttl_secs: i64,
    ) -> Result<(), Error> {
        let now = now_secs();
        sqlx::query("DELETE FROM approvals WHERE expires_at < $1")
            .bind(now)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO approvals (token, binding, description, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(token)
        .bind(binding)
        .bind(description.to_string())
        .bind(now)
        .bind(now + ttl_secs)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// A token's row: binding, description, expiry, approval, use and refusal.
    async fn approval_row(&self, token: &str) -> Result<Option<ApprovalRow>, Error> {
        sqlx::query_as(
            "SELECT binding, description, expires_at, approved_at, used_at, declined_at,
               approved_by
             FROM approvals WHERE token = $1",
        )
        .bind(token)
        .fetch_optional(self.pool())
        .await
        .map_err(db_error)
    }

    pub async fn approval(&self, token: &str) -> Result<Approval, Error> {
        let (_, description, expires_at, approved_at, used_at, declined_at, approved_by) = self
            .approval_row(token)
            .await?
            .ok_or_else(|| unknown(token))?;
        Ok(Approval {
            token: token.to_string(),
            description: serde_json::from_str(&description).unwrap_or_default(),
            expires_at,
            approved_at,
            used_at,
            declined_at,
            approved_by,
        })
    }

    /// The confirmations still waiting for a person (unexpired, neither approved nor used),
    /// newest first.
    pub async fn waiting_approvals(&self) -> Result<Vec<Approval>, Error> {
        let mut all = self.recent_approvals().await?;
        all.retain(|a| a.decision() == Decision::Waiting);
        Ok(all)
    }

    /// The confirmation whose console page is `page`, decided or not, while it is kept.
    pub async fn approval_at_page(&self, page: &str) -> Result<Approval, Error> {
        let mut found = self.recent_approvals().await?.into_iter();
        found.find(|a| a.page() == page).ok_or_else(|| {
            Error::not_found("no request of an assistant is kept at this address")
                .with_next_step("it may have expired: ask the assistant to try again")
        })
    }

    /// Every confirmation kept (those expired are removed as new ones come), newest first.
    async fn recent_approvals(&self) -> Result<Vec<Approval>, Error> {
        // The row of `approval_row`, with the token where the binding was.
        let rows: Vec<ApprovalRow> = sqlx::query_as(
            "SELECT token, description, expires_at, approved_at, used_at, declined_at,
               approved_by
             FROM approvals ORDER BY expires_at DESC, token",
        )
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(token, description, expires_at, approved_at, used_at, declined_at, by)| {
                    Approval {
                        token,
                        description: serde_json::from_str(&description).unwrap_or_default(),
                        expires_at,
                        approved_at,
                        used_at,
                        declined_at,
                        approved_by: by,
                    }
                },
            )
            .collect())
    }

    /// The person's refusal of `token`, while it waits: the write it stands for never runs,
    /// and the assistant that calls with it is told the user declined.
    pub async fn decline(&self, token: &str) -> Result<(), Error> {
        self.answer(
            token,
            "UPDATE approvals SET declined_at = $1
             WHERE token = $2 AND expires_at >= $1 AND used_at IS NULL AND approved_at IS NULL
               AND declined_at IS NULL",
            None,
        )
        .await
    }

    /// The person's approval of `token` (`by` a terminal or a passkey), while it is
    /// unexpired, unused and not declined.
    pub async fn approve(&self, token: &str, by: ApprovedBy) -> Result<(), Error> {
        self.answer(
            token,
            "UPDATE approvals SET approved_at = $1, approved_by = $3
             WHERE token = $2 AND expires_at >= $1 AND used_at IS NULL AND declined_at IS NULL",
            Some(by.as_str()),
        )
        .await
    }

    /// Records the person's answer to `token`: `statement` stamps it with `$1` (now), and
    /// `$3` (how) if given, where token `$2` still waits for one.
    async fn answer(
        &self,
        token: &str,
        statement: &'static str,
        how: Option<&str>,
    ) -> Result<(), Error> {
        let mut query = sqlx::query(statement).bind(now_secs()).bind(token);
        if let Some(how) = how {
            query = query.bind(how);
        }
        let done = query.execute(self.pool()).await.map_err(db_error)?;
        match done.rows_affected() {
            0 => Err(unknown(token)),
            _ => Ok(()),
        }
    }

    /// Takes `token` for one run of the write bound to `binding`: unexpired, unused, and
    /// approved as `needed`. A token for other arguments, or not yet approved so, stays as
    /// it is.
    pub async fn redeem_approval(
        &self,
        token: &str,
        binding: &str,
        needed: Needed,
    ) -> Result<(), Error> {
        let refuse = |why: String, step: &str| {
            Error::confirmation_required(format!("the confirm_token {why}; nothing was changed"))
                .with_next_step(step.to_string())
        };
        let again = "call again with dry_run: true, show the plan to the user, and ask them to approve its confirm_token";
        let Some((bound, _, expires_at, approved_at, used_at, declined_at, approved_by)) =
            self.approval_row(token).await?
        else {
            return Err(refuse("is unknown".into(), again));
        };
        if declined_at.is_some() {
            return Err(Error::confirmation_declined(
                "the user declined this write; nothing was changed",
            )
            .with_next_step("ask the user what they want instead"));
        }
        if used_at.is_some() {
            return Err(refuse("was already used".into(), again));
        }
        if expires_at < now_secs() {
            return Err(refuse("has expired".into(), again));
        }
        if bound != binding {
            return Err(refuse(
                "was issued for other arguments or other messages".into(),
                again,
            ));
        }
        let by_passkey = "show the user the plan and ask them to approve it with their passkey in the console; then call again with this confirm_token";
        match (needed, approved_at, approved_by) {
            (Needed::Person, None, _) => {
                return Err(refuse(
                    "is not approved by the user yet".into(),
                    &format!(
                        "show the user the plan and ask them to run: mailbroker approve {token}; then call again with this confirm_token"
                    ),
                ));
            }
            (Needed::Passkey, None, _) => {
                return Err(refuse("is not approved by the user yet".into(), by_passkey));
            }
            (Needed::Passkey, Some(_), by) if by != Some(ApprovedBy::Passkey) => {
                return Err(refuse(
                    "was approved at a terminal, and here only a passkey in the console approves"
                        .into(),
                    by_passkey,
                ));
            }
            _ => {}
        }
        let taken =
            sqlx::query("UPDATE approvals SET used_at = $1 WHERE token = $2 AND used_at IS NULL")
                .bind(now_secs())
                .bind(token)
                .execute(self.pool())
                .await
                .map_err(db_error)?;
        match taken.rows_affected() {
            0 => Err(refuse("was already used".into(), again)),
            _ => Ok(()),
        }
    }
}

impl Store {
    /// Records that the input request `nonce` (valid until `expires_at`) was answered; false
    /// when it was answered before, by this process or another.
    pub async fn claim_input_answer(&self, nonce: &str, expires_at: i64) -> Result<bool, Error> {
        sqlx::query("DELETE FROM input_answers WHERE expires_at < $1")
            .bind(now_secs())
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        let claimed = sqlx::query(
            "INSERT INTO input_answers (nonce, expires_at) VALUES ($1, $2)
             ON CONFLICT (nonce) DO NOTHING",
        )
        .bind(nonce)
        .bind(expires_at)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(claimed.rows_affected() == 1)
    }

    /// The initialize parameters of MCP session `id` (JSON), if a server of this index
    /// started it within `ttl_secs`.
    pub async fn mcp_session(&self, id: &str, ttl_secs: i64) -> Result<Option<String>, Error> {
        sqlx::query_scalar("SELECT state FROM mcp_sessions WHERE id = $1 AND updated_at >= $2")
            .bind(id)
            .bind(now_secs() - ttl_secs)
            .fetch_optional(self.pool())
            .await
            .map_err(db_error)
    }

    /// Records MCP session `id`'s initialize parameters; sessions older than `ttl_secs` go.
    pub async fn put_mcp_session(&self, id: &str, state: &str, ttl_secs: i64) -> Result<(), Error> {
        let now = now_secs();
        sqlx::query("DELETE FROM mcp_sessions WHERE updated_at < $1")
            .bind(now - ttl_secs)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO mcp_sessions (id, state, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
        )
        .bind(id)
        .bind(state)
        .bind(now)
        .execute(self.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    pub async fn delete_mcp_session(&self, id: &str) -> Result<(), Error> {
        sqlx::query("DELETE FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }
}
