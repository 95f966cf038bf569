//! How many messages of a change ended each way.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::Outcome;

/// The count of each `Outcome` among a change's messages: the one place these counters are
/// declared. A report, a journal row and a tool result embed it (flattened: one field per
/// outcome, `applied`, `unchanged`, `stale`, `failed`, `unknown`), so an outcome added to
/// `Outcome` is counted, stored and shown everywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally([u64; Outcome::ALL.len()]);

impl Tally {
    /// One more message ended as `outcome`.
    pub fn add(&mut self, outcome: Outcome) {
        self.add_n(outcome, 1);
    }

    pub fn add_n(&mut self, outcome: Outcome, n: u64) {
        self.0[outcome as usize] += n;
    }

    pub fn get(&self, outcome: Outcome) -> u64 {
        self.0[outcome as usize]
    }

    pub fn set(&mut self, outcome: Outcome, n: u64) {
        self.0[outcome as usize] = n;
    }

    /// Every count, with its outcome, in `Outcome::ALL`'s order.
    pub fn counts(&self) -> impl Iterator<Item = (Outcome, u64)> + '_ {
        Outcome::ALL.into_iter().map(|o| (o, self.get(o)))
    }

    /// Whether every message was applied or left as it was (SPEC §6's `success`).
    pub fn settled(&self) -> bool {
        self.counts()
            .all(|(o, n)| n == 0 || matches!(o, Outcome::Applied | Outcome::Unchanged))
    }

    /// As a tool result lists it: `applied` always, the others only where not zero (twenty
    /// lines of zeros cost an assistant's context as much as the lines themselves).
    pub fn nonzero(&self) -> NonzeroTally {
        NonzeroTally(*self)
    }
}

impl Serialize for Tally {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(Outcome::ALL.len()))?;
        for (outcome, n) in self.counts() {
            map.serialize_entry(outcome.as_str(), &n)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Tally {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counts;
        impl<'de> Visitor<'de> for Counts {
            type Value = Tally;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a count per outcome")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tally, A::Error> {
                let mut tally = Tally::default();
                while let Some((key, n)) = map.next_entry::<String, u64>()? {
                    if let Some(outcome) = Outcome::parse(&key) {
                        tally.set(outcome, n);
                    }
                }
                Ok(tally)
            }
        }
        d.deserialize_map(Counts)
    }
}

/// `Tally::nonzero`.
#[derive(Debug, Clone, Copy)]
pub struct NonzeroTally(Tally);

impl Serialize for NonzeroTally {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (outcome, n) in self.0.counts() {
            if n != 0 || outcome == Outcome::Applied {
                map.serialize_entry(outcome.as_str(), &n)?;
            }
        }
        map.end()
    }
}

#[cfg(feature = "schemars")]
mod schema {
    use super::{NonzeroTally, Outcome, Tally};
    use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

    fn counts(required: &[&str]) -> Schema {
        let properties: serde_json::Map<String, serde_json::Value> = Outcome::ALL
            .iter()
            .map(|o| {
                (
                    o.as_str().to_string(),
                    serde_json::json!({ "type": "integer" }),
                )
            })
            .collect();
        json_schema!({ "type": "object", "properties": properties, "required": required })
    }

    /// Both shapes are one integer field per outcome; they differ in which are always present.
    macro_rules! counts_schema {
        ($ty:ident, $required:expr) => {
            impl JsonSchema for $ty {
                fn schema_name() -> std::borrow::Cow<'static, str> {
                    stringify!($ty).into()
                }
                fn inline_schema() -> bool {
                    true
                }
                fn json_schema(_: &mut SchemaGenerator) -> Schema {
                    counts(&$required)
                }
            }
        };
    }

    counts_schema!(Tally, Outcome::ALL.map(|o| o.as_str()));
    counts_schema!(NonzeroTally, ["applied"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_is_one_field_per_outcome() {
        let mut t = Tally::default();
        t.add(Outcome::Applied);
        t.add_n(Outcome::Unknown, 3);
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"applied": 1, "unchanged": 0, "stale": 0, "failed": 0, "unknown": 3})
        );
        assert_eq!(serde_json::from_value::<Tally>(json).unwrap(), t);
        assert_eq!(
            serde_json::to_value(t.nonzero()).unwrap(),
            serde_json::json!({"applied": 1, "unknown": 3})
        );
        assert!(!t.settled());
        let mut ok = Tally::default();
        ok.add(Outcome::Unchanged);
        assert!(ok.settled());
    }
}
