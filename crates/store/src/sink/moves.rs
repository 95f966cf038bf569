//! Settling moves (`SyncSink::settle_moves`): the one place where the index recognises a
//! message that another client moved, for every provider, by what its provider says
//! identifies it across a move (`SameMessage`). A recognised message keeps its row, so its
//! local id, its journal lines and its full-text entry stay.

use std::collections::{BTreeMap, HashMap};

use mailbroker_core::{Arrival, MessageFlags, RemoteId, Result, SameMessage, Settled, Version};
use sqlx::Any;

use super::{StoreSink, json_ids, json_list};
use crate::{db_error, replace_tags};

/// Arrivals of one mailbox each.
type ByMailbox = Vec<(String, Vec<Arrival>)>;

/// Splits arrivals into those recognised by content and those recognised by id.
pub(super) fn by_how_recognised(arrivals: ByMailbox) -> (ByMailbox, ByMailbox) {
    let mut by_content = Vec::new();
    let mut by_id = Vec::new();
    for (mailbox, list) in arrivals {
        let (ids, contents): (Vec<Arrival>, Vec<Arrival>) =
            list.into_iter().partition(|a| a.same == SameMessage::Id);
        by_content.push((mailbox.clone(), contents));
        by_id.push((mailbox, ids));
    }
    (by_content, by_id)
}

/// A row leaving its mailbox: its id, mailbox and size.
type Leaving = (i64, String, u64);

impl StoreSink {
    /// Arrivals whose id changes with a move (IMAP), against the rows that left other
    /// mailboxes (`departures`): a pair is made only where one departure and one arrival
    /// alone share the Message-ID and size; the other departures are removed.
    pub(super) async fn settle_by_content(
        &mut self,
        departures: Vec<(String, Vec<RemoteId>)>,
        arrivals: ByMailbox,
    ) -> Result<BTreeMap<String, Settled>> {
        let mut settled: BTreeMap<String, Settled> = BTreeMap::new();
        let mut tx = self.begin().await?;
        // Rows leaving, by Message-ID; those without one can only be removed.
        let mut leaving: HashMap<String, Vec<Leaving>> = HashMap::new();
        let mut removing: Vec<(i64, String)> = Vec::new();
        for (mailbox, ids) in departures {
            let mailbox_id = self.mailbox(&mailbox)?;
            let rows: Vec<(i64, Option<String>, i64)> = sqlx::query_as(
                "SELECT id, message_id, size FROM messages
                 WHERE mailbox_id = $1 AND remote_id IN (SELECT value FROM json_each($2))",
            )
            .bind(mailbox_id)
            .bind(json_ids(&ids)?)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            for (id, message_id, size) in rows {
                let size = u64::try_from(size).unwrap_or(0);
                match message_id {
                    Some(m) => leaving
                        .entry(m)
                        .or_default()
                        .push((id, mailbox.clone(), size)),
                    None => removing.push((id, mailbox.clone())),
                }
            }
        }
        let mut twins: HashMap<(&str, Option<u64>), usize> = HashMap::new();
        for arrival in arrivals.iter().flat_map(|(_, list)| list) {
            if let Some(key) = content_of(arrival) {
                *twins.entry(key).or_default() += 1;
            }
        }
        let mut matched = Vec::new();
        for (mailbox, list) in &arrivals {
            let mailbox_id = self.mailbox(mailbox)?;
            let entry = settled.entry(mailbox.clone()).or_default();
            for arrival in list {
                let alone = content_of(arrival).is_some_and(|key| twins[&key] == 1);
                match alone.then(|| departed(&mut leaving, arrival)).flatten() {
                    Some(id) => {
                        matched.push((id, mailbox_id, arrival));
                        entry.moved_in += 1;
                    }
                    None => entry.unmatched.push(arrival.id.clone()),
                }
            }
        }
        let mut retagged = Vec::new();
        for (id, mailbox_id, arrival) in matched {
            move_row(&mut tx, id, mailbox_id, arrival).await?;
            retagged.push((id, json_list(&arrival.flags.tags)));
        }
        removing.extend(
            leaving
                .into_values()
                .flatten()
                .map(|(id, mailbox, _)| (id, mailbox)),
        );
        for (id, mailbox) in removing {
            sqlx::query("DELETE FROM messages WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            settled.entry(mailbox).or_default().removed += 1;
        }
        replace_tags(&mut tx, &retagged).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(settled)
    }

    /// Arrivals in `mailbox` whose id survives a move (Gmail, Graph): the row with the same
    /// id in another mailbox of the account moves here, then takes the arrival's state.
    pub(super) async fn settle_by_id(
        &mut self,
        mailbox: &str,
        arrivals: Vec<Arrival>,
    ) -> Result<Settled> {
        if arrivals.is_empty() {
            return Ok(Settled::default());
        }
        let mailbox_id = self.mailbox(mailbox)?;
        let ids: Vec<RemoteId> = arrivals.iter().map(|a| a.id.clone()).collect();
        let moved: Vec<String> = sqlx::query_scalar(
            "UPDATE messages SET mailbox_id = $1
             WHERE remote_id IN (SELECT value FROM json_each($2))
               AND mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = $3 AND id != $1)
             RETURNING remote_id",
        )
        .bind(mailbox_id)
        .bind(json_ids(&ids)?)
        .bind(self.account.as_str())
        .fetch_all(self.store.pool())
        .await
        .map_err(db_error)?;
        let moved: std::collections::HashSet<String> = moved.into_iter().collect();
        let (here, new): (Vec<Arrival>, Vec<Arrival>) = arrivals
            .into_iter()
            .partition(|a| moved.contains(a.id.as_str()));
        let states: Vec<(RemoteId, Version, MessageFlags)> = here
            .into_iter()
            .map(|a| (a.id, a.version, a.flags))
            .collect();
        let moved_in = states.len() as u64;
        mailbroker_core::ApplyEach::update_flags(self, mailbox, states).await?;
        Ok(Settled {
            mailbox: mailbox.to_string(),
            removed: 0,
            moved_in,
            unmatched: new.into_iter().map(|a| a.id).collect(),
        })
    }
}

/// What recognises an arrival by content: its Message-ID and size.
fn content_of(arrival: &Arrival) -> Option<(&str, Option<u64>)> {
    match &arrival.same {
        SameMessage::Content { message_id, size } => Some((message_id, *size)),
        SameMessage::Id => None,
    }
}

/// The row that left with `arrival`'s Message-ID and size, if exactly one did.
fn departed(leaving: &mut HashMap<String, Vec<Leaving>>, arrival: &Arrival) -> Option<i64> {
    let (message_id, size) = content_of(arrival)?;
    let rows = leaving.get_mut(message_id)?;
    let fits = |s: u64| size.is_none_or(|size| size == s);
    let fitting: Vec<usize> = (0..rows.len()).filter(|i| fits(rows[*i].2)).collect();
    match fitting.as_slice() {
        [one] => Some(rows.remove(*one).0),
        _ => None,
    }
}

/// Moves row `id` to its new mailbox under the arrival's id, with the arrival's state: the
/// message moved; its local id and full-text entry stay.
async fn move_row(
    tx: &mut sqlx::Transaction<'_, Any>,
    id: i64,
    mailbox_id: i64,
    arrival: &Arrival,
) -> Result<()> {
    sqlx::query("UPDATE messages SET mailbox_id = $1, remote_id = $2 WHERE id = $3")
        .bind(mailbox_id)
        .bind(arrival.id.as_str())
        .bind(id)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    sqlx::query(
        "UPDATE message_state SET version = $1, flags = $2, tags = $3, is_read = $4, is_flagged = $5
         WHERE id = $6",
    )
    .bind(arrival.version.as_str())
    .bind(json_list(&arrival.flags.raw))
    .bind(json_list(&arrival.flags.tags))
    .bind(i64::from(arrival.flags.read))
    .bind(i64::from(arrival.flags.flagged))
    .bind(id)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}
