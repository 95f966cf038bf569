//! What a person is shown of a selection before a write or a deletion runs, and what a
//! deletion manifest records of its messages (SPEC §5).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A selection's messages: how many, their size, their dates, who sent most of them, and
/// where they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Summary {
    pub count: u64,
    pub bytes: u64,
    /// The oldest message's date, RFC 3339.
    pub first_date: Option<String>,
    /// The newest message's date, RFC 3339.
    pub last_date: Option<String>,
    /// The ten most frequent senders, most first.
    pub top_senders: Vec<Sender>,
    /// Messages per account.
    pub accounts: BTreeMap<String, u64>,
    /// Messages per `account/mailbox`.
    pub mailboxes: BTreeMap<String, u64>,
}

/// A sender and how many of the selection's messages they sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Sender {
    /// The address as indexed; empty when the message named none.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub from: String,
    pub messages: u64,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl Summary {
    /// The senders a person is shown first (at most `n`), and how many messages the others sent.
    pub fn first_senders(&self, n: usize) -> (&[Sender], u64) {
        let shown = &self.top_senders[..n.min(self.top_senders.len())];
        let theirs: u64 = shown.iter().map(|s| s.messages).sum();
        (shown, self.count.saturating_sub(theirs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_what_the_index_writes() {
        let json = r#"{"count":3,"bytes":10,"first_date":null,"last_date":null,
            "top_senders":[{"from":null,"messages":2},{"from":"a@x","messages":1}],
            "accounts":{"w":3},"mailboxes":{"w/INBOX":3}}"#;
        let s: Summary = serde_json::from_str(json).unwrap();
        assert_eq!(s.top_senders[0].from, "");
        assert_eq!(s.first_senders(1), (&s.top_senders[..1], 1));
        assert_eq!(s.accounts["w"], 3);
    }
}
