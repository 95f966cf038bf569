//! The confirmation budget: how many messages an assistant changed without a person's
//! confirmation, per account, over a sliding window. Checking and spending are one
//! transaction, so two calls at once (from two sessions or two processes) cannot both fit
//! in what is left.

use std::collections::BTreeMap;

use mailbroker_core::{AccountId, Error};

use super::{Store, db_error, now_secs};

/// How long spent rows are kept, whatever the window: longer than any window in use.
const KEEP_SECS: i64 = 24 * 60 * 60;

/// An account whose budget a call would cross: what it asks for and what the window has
/// spent already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Over {
    pub account: AccountId,
    pub asked: u64,
    pub spent: u64,
}

impl Store {
    /// Spends `asked` (messages by account) from a budget of `limit` messages per account
    /// over the last `window_secs`, when every account has room; otherwise spends nothing
    /// and says which account would cross it. With `spend` false it only looks (a dry run).
    pub async fn spend_budget(
        &self,
        asked: &BTreeMap<AccountId, u64>,
        (limit, window_secs): (u64, i64),
        spend: bool,
    ) -> Result<Option<Over>, Error> {
        let now = now_secs();
        let mut tx = self.write_tx().await?;
        for (account, n) in asked {
            let spent: i64 = sqlx::query_scalar(
                "SELECT CAST(COALESCE(SUM(messages), 0) AS BIGINT) FROM unconfirmed_writes
                 WHERE account_id = $1 AND at > $2",
            )
            .bind(account.as_str())
            .bind(now - window_secs)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
            let spent = spent.max(0) as u64;
            if spent + n > limit {
                return Ok(Some(Over {
                    account: account.clone(),
                    asked: *n,
                    spent,
                }));
            }
        }
        if !spend {
            return Ok(None);
        }
        sqlx::query("DELETE FROM unconfirmed_writes WHERE at < $1")
            .bind(now - KEEP_SECS)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        for (account, n) in asked.iter().filter(|(_, n)| **n > 0) {
            sqlx::query(
                "INSERT INTO unconfirmed_writes (account_id, at, messages) VALUES ($1, $2, $3)",
            )
            .bind(account.as_str())
            .bind(now)
            .bind(*n as i64)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_budget_is_spent_per_account_until_it_would_be_crossed() {
        for (_dir, store) in crate::test_stores().await {
            budget_on(store).await;
        }
    }

    async fn budget_on(store: Store) {
        let (a, b): (AccountId, AccountId) = ("a".parse().unwrap(), "b".parse().unwrap());
        let ask = |pairs: &[(&AccountId, u64)]| -> BTreeMap<AccountId, u64> {
            pairs.iter().map(|(k, v)| ((*k).clone(), *v)).collect()
        };
        let looked = store
            .spend_budget(&ask(&[(&a, 25)]), (25, 600), false)
            .await
            .unwrap();
        assert_eq!(looked, None);
        assert_eq!(
            store
                .spend_budget(&ask(&[(&a, 25)]), (25, 600), true)
                .await
                .unwrap(),
            None
        );
        let over = store
            .spend_budget(&ask(&[(&a, 1)]), (25, 600), true)
            .await
            .unwrap();
        assert_eq!(
            over,
            Some(Over {
                account: a.clone(),
                asked: 1,
                spent: 25
            })
        );
        // Another account has its own budget; a refused call spent nothing.
        assert_eq!(
            store
                .spend_budget(&ask(&[(&b, 20)]), (25, 600), true)
                .await
                .unwrap(),
            None
        );
        let both = store
            .spend_budget(&ask(&[(&b, 5), (&a, 1)]), (25, 600), true)
            .await
            .unwrap();
        assert_eq!(both.map(|o| o.account), Some(a.clone()));
        assert_eq!(
            store
                .spend_budget(&ask(&[(&b, 5)]), (25, 600), true)
                .await
                .unwrap(),
            None
        );
        // Outside the window, nothing counts.
        assert_eq!(
            store
                .spend_budget(&ask(&[(&a, 25)]), (25, -1), true)
                .await
                .unwrap(),
            None
        );
    }
}
