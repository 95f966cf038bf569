//! IMAP's numbers behind the core's opaque identities. A message is `UIDVALIDITY:UID` (both
//! decimal), its version is its modseq, and a mailbox's cursor holds the three counters a
//! later sync compares with the server's.
//!
//! Architecture Invariant: nothing outside this module builds or reads those strings, so their
//! format can change with a migration and this file alone.

use mailbroker_core::{MailboxCursor, RemoteId, Version};
use serde::{Deserialize, Serialize};

/// A message's number within its mailbox, for one `UidValidity`.
pub(crate) type Uid = u64;
/// A mailbox's UIDVALIDITY: when it changes, every UID of that mailbox is void.
pub(crate) type UidValidity = u32;

pub(crate) fn remote(uidvalidity: UidValidity, uid: Uid) -> RemoteId {
    RemoteId::new(format!("{uidvalidity}:{uid}"))
}

/// The UIDVALIDITY and UID in an id this adapter made; `None` for anything else.
pub(crate) fn parse(id: &RemoteId) -> Option<(UidValidity, Uid)> {
    let (v, u) = id.as_str().split_once(':')?;
    Some((v.parse().ok()?, u.parse().ok()?))
}

/// The UID of `id` if it belongs to `uidvalidity`: an id from before a UIDVALIDITY change
/// names no message now.
pub(crate) fn uid_in(id: &RemoteId, uidvalidity: UidValidity) -> Option<Uid> {
    parse(id).filter(|(v, _)| *v == uidvalidity).map(|(_, u)| u)
}

/// A modseq as a version; 0 (no CONDSTORE) is no version.
pub(crate) fn version(modseq: u64) -> Version {
    match modseq {
        0 => Version::default(),
        m => Version::new(m.to_string()),
    }
}

pub(crate) fn modseq(version: &Version) -> u64 {
    version.as_str().parse().unwrap_or(0)
}

/// Where the last sync of a mailbox stopped. Zero means "not known yet".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cursor {
    pub uidvalidity: UidValidity,
    pub uidnext: Uid,
    pub highestmodseq: u64,
}

impl Cursor {
    /// The counters in a stored cursor; an empty or foreign one reads as unknown.
    pub(crate) fn read(cursor: &MailboxCursor) -> Cursor {
        serde_json::from_str(cursor.as_str()).unwrap_or_default()
    }

    pub(crate) fn to_cursor(self) -> MailboxCursor {
        // Serializing three integers cannot fail.
        MailboxCursor::new(serde_json::to_string(&self).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_carry_their_uidvalidity() {
        let id = remote(7, 4_000_000_000);
        assert_eq!(id.as_str(), "7:4000000000");
        assert_eq!(parse(&id), Some((7, 4_000_000_000)));
        assert_eq!(uid_in(&id, 7), Some(4_000_000_000));
        assert_eq!(uid_in(&id, 8), None);
        for foreign in ["18c2f1a3b4d5e6f7", "", "7:", ":3", "x:3"] {
            assert_eq!(parse(&RemoteId::new(foreign)), None, "{foreign:?}");
        }
    }

    #[test]
    fn cursors_and_versions_round_trip() {
        let c = Cursor {
            uidvalidity: 1,
            uidnext: 10,
            highestmodseq: 99,
        };
        assert_eq!(Cursor::read(&c.to_cursor()), c);
        assert_eq!(Cursor::read(&MailboxCursor::default()), Cursor::default());
        assert_eq!(modseq(&version(42)), 42);
        assert!(!version(0).is_known());
    }
}
