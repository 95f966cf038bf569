//! `serve` processes of one index as nodes that share its accounts: each beats while it runs,
//! and each account is watched by exactly one live node. A node that stops beating for the
//! takeover time is dead, as is one whose process is gone from this host (killed, say): its
//! accounts go to the others at their next beat. First syncs, which spend a provider's quota
//! most, run only so many at once over all nodes (`first_syncs`).
//!
//! Invariant: `account_watchers` names at most one node per account (its primary key), and a
//! node changes it only inside one write transaction that first removes the dead nodes, so
//! two live nodes never both claim an account.

use mailbroker_core::{AccountId, Error};

use super::{Store, db_error, now_ms, process_runs};

impl Store {
    /// Node `id` beats, and takes its share of the accounts: the dead nodes (silent for
    /// `takeover_ms`) are removed with their claims, then it releases what it holds beyond
    /// an even share of the accounts among the live nodes and claims unwatched ones up to
    /// it. Returns the accounts it watches now, by id, and whether its row was made anew
    /// (first beat, or another node had taken it for dead): its status is then to be
    /// written again.
    pub async fn beat_and_share(
        &self,
        id: &str,
        pid: u32,
        takeover_ms: i64,
    ) -> Result<(Vec<AccountId>, bool), Error> {
        let (now, here) = (now_ms(), crate::util::host());
        let mut tx = self.write_tx().await?;
        let run = async {
            let beat = sqlx::query("UPDATE serve_nodes SET heartbeat_at = $1 WHERE id = $2")
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let joined = beat == 0;
            if joined {
                sqlx::query(
                    "INSERT INTO serve_nodes (id, host, pid, heartbeat_at, takeover_ms)
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(id)
                .bind(&here)
                .bind(i64::from(pid))
                .bind(now)
                .bind(takeover_ms)
                .execute(&mut *tx)
                .await?;
            }
            let neighbours: Vec<(String, i64)> =
                sqlx::query_as("SELECT id, pid FROM serve_nodes WHERE host = $1 AND id != $2")
                    .bind(&here)
                    .bind(id)
                    .fetch_all(&mut *tx)
                    .await?;
            for (gone, _) in neighbours.iter().filter(|(_, pid)| !process_runs(*pid)) {
                sqlx::query("DELETE FROM serve_nodes WHERE id = $1")
                    .bind(gone)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM serve_nodes WHERE heartbeat_at < $1")
                .bind(now - takeover_ms)
                .execute(&mut *tx)
                .await?;
            for orphans in [
                "DELETE FROM account_watchers WHERE node_id NOT IN (SELECT id FROM serve_nodes)",
                "DELETE FROM first_syncs WHERE node_id NOT IN (SELECT id FROM serve_nodes)",
            ] {
                sqlx::query(orphans).execute(&mut *tx).await?;
            }
            let (nodes, accounts): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM serve_nodes), (SELECT count(*) FROM accounts)",
            )
            .fetch_one(&mut *tx)
            .await?;
            let share = (accounts + nodes - 1) / nodes.max(1);
            // Beyond its share (a node joined): the last ones by id go back.
            sqlx::query(
                "DELETE FROM account_watchers WHERE node_id = $1 AND account_id NOT IN (
                   SELECT account_id FROM account_watchers WHERE node_id = $1
                   ORDER BY account_id LIMIT $2)",
            )
            .bind(id)
            .bind(share)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO account_watchers (account_id, node_id, since)
                 SELECT a.id, $1, $2 FROM accounts a
                 WHERE a.id NOT IN (SELECT account_id FROM account_watchers)
                 ORDER BY a.id
                 LIMIT (SELECT CASE WHEN n < $3 THEN $3 - n ELSE 0 END FROM
                   (SELECT count(*) AS n FROM account_watchers WHERE node_id = $1) AS mine)",
            )
            .bind(id)
            .bind(now)
            .bind(share)
            .execute(&mut *tx)
            .await?;
            let mine = sqlx::query_scalar::<_, String>(
                "SELECT account_id FROM account_watchers WHERE node_id = $1 ORDER BY account_id",
            )
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            Ok::<_, sqlx::Error>((mine, joined))
        }
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        let (mine, joined) = run;
        let mine = mine.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
        Ok((mine, joined))
    }

    /// What node `id` says of itself now (`freshness`), as JSON.
    pub async fn set_node_status(&self, id: &str, status: &str) -> Result<(), Error> {
        sqlx::query("UPDATE serve_nodes SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(id)
            .execute(self.pool())
            .await
            .map(drop)
            .map_err(db_error)
    }

    /// What the live nodes say of themselves (their host, pid and status JSON), by pid: a
    /// node is live while its beat is younger than its takeover time and, on this host, its
    /// process runs, the rule the nodes apply to each other.
    pub async fn live_nodes(&self) -> Result<Vec<(String, u32, String)>, Error> {
        let rows: Vec<(String, i64, String)> = sqlx::query_as(
            "SELECT host, pid, status FROM serve_nodes WHERE heartbeat_at >= $1 - takeover_ms
             ORDER BY host, pid",
        )
        .bind(now_ms())
        .fetch_all(self.pool())
        .await
        .map_err(db_error)?;
        let here = crate::util::host();
        Ok(rows
            .into_iter()
            .filter(|(host, pid, _)| *host != here || process_runs(*pid))
            .filter_map(|(host, pid, status)| Some((host, u32::try_from(pid).ok()?, status)))
            .collect())
    }

    /// Node `id` stops: its accounts are free for the others at once.
    pub async fn leave(&self, id: &str) -> Result<(), Error> {
        let mut tx = self.write_tx().await?;
        for sql in [
            "DELETE FROM account_watchers WHERE node_id = $1",
            "DELETE FROM first_syncs WHERE node_id = $1",
            "DELETE FROM serve_nodes WHERE id = $1",
        ] {
            sqlx::query(sql)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    /// Whether node `node` may run `account`'s first sync now: it holds its claim already,
    /// or takes one while fewer than `at_once` first syncs run on all nodes.
    pub async fn claim_first_sync(
        &self,
        node: &str,
        account: &AccountId,
        at_once: u32,
    ) -> Result<bool, Error> {
        let mut tx = self.write_tx().await?;
        let claimed = sqlx::query(
            "INSERT INTO first_syncs (account_id, node_id, started_at)
             SELECT $1, $2, $3
             WHERE (SELECT count(*) FROM first_syncs WHERE account_id != $1) < $4
                OR EXISTS (SELECT 1 FROM first_syncs WHERE account_id = $1 AND node_id = $2)
             ON CONFLICT (account_id) DO UPDATE SET node_id = first_syncs.node_id
               WHERE first_syncs.node_id = $2",
        )
        .bind(account.as_str())
        .bind(node)
        .bind(now_ms())
        .bind(i64::from(at_once))
        .execute(&mut *tx)
        .await
        .map_err(db_error)?
        .rows_affected();
        tx.commit().await.map_err(db_error)?;
        Ok(claimed == 1)
    }

    /// `account`'s first sync ended (synced or not): its place goes to the next in line.
    pub async fn end_first_sync(&self, account: &AccountId) -> Result<(), Error> {
        sqlx::query("DELETE FROM first_syncs WHERE account_id = $1")
            .bind(account.as_str())
            .execute(self.pool())
            .await
            .map(drop)
            .map_err(db_error)
    }
}
