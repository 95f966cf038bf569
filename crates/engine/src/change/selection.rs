//! Which messages a change names: explicit ids, or every match of a query.

use mailbroker_core::{Error, Result};

use mailbroker_query::Query;
use mailbroker_store::{Chosen, MessageRef, Store};

/// Ids (each once, in the order first given) or a query, parsed when the selection is made.
#[derive(Debug, Clone)]
pub enum Selection {
    Ids(Vec<i64>),
    Query { text: String, parsed: Query },
}

impl Selection {
    /// From a surface's arguments: ids or a query, exactly one of them.
    pub fn of(ids: &[i64], query: Option<&str>) -> Result<Selection> {
        match (ids.is_empty(), query) {
            (true, Some(q)) => Ok(Selection::Query {
                text: q.to_string(),
                parsed: mailbroker_query::parse_selection(q, mailbroker_store::now_secs())?,
            }),
            (false, None) => {
                // Once, here: a message named twice is still one message to change.
                let mut seen = std::collections::HashSet::new();
                Ok(Selection::Ids(
                    ids.iter().copied().filter(|id| seen.insert(*id)).collect(),
                ))
            }
            (true, None) => Err(Error::validation("name the messages: ids or a query")
                .with_next_step("find ids with search, or pass a query")),
            (false, Some(_)) => Err(Error::validation(
                "give either message ids or a query, not both",
            )
            .with_next_step("find ids with search, or pass only the query")),
        }
    }

    /// The selection as the journal and a manifest record it.
    pub fn recorded(&self) -> Chosen {
        match self {
            Selection::Ids(ids) => Chosen::Ids { ids: ids.clone() },
            Selection::Query { text, .. } => Chosen::Query {
                query: text.clone(),
            },
        }
    }

    /// The parsed query, or None for ids.
    pub(crate) fn query(&self) -> Option<&Query> {
        match self {
            Selection::Ids(_) => None,
            Selection::Query { parsed, .. } => Some(parsed),
        }
    }

    /// The ids named, or none for a query.
    pub(crate) fn ids(&self) -> &[i64] {
        match self {
            Selection::Ids(ids) => ids,
            Selection::Query { .. } => &[],
        }
    }

    /// The selection as recorded, and the index rows of the messages it names.
    pub async fn rows(&self, store: &Store) -> Result<(Chosen, Vec<MessageRef>)> {
        let rows = match self {
            Selection::Ids(ids) => store.message_refs(ids).await?,
            Selection::Query { parsed, .. } => store.search_refs(parsed).await?,
        };
        tracing::debug!(rows = rows.len(), "selection resolved");
        Ok((self.recorded(), rows))
    }
}
