//! A message's parts as mailbroker names them: by IMAP section number (`2`, `1.2`), the same
//! on every provider; an attachment as listed; one part as a provider read it alone.

use serde::{Deserialize, Serialize};

/// An attachment of a message, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Its part (the IMAP section number): what `attachments --part` and a save name.
    pub part: String,
    /// Its file name as sent (decoded), if it has one; untrusted.
    pub name: Option<String>,
    pub content_type: String,
    pub size: u64,
}

/// One part of a message as a provider read it alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchedPart {
    /// Its MIME header followed by its body, as IMAP's `BODY[n.MIME]` and `BODY[n]` give
    /// them: the caller decodes it (with a MIME library).
    Mime(Vec<u8>),
    /// Decoded already, with what the provider says of it (JMAP's body structure).
    Decoded {
        name: Option<String>,
        content_type: String,
        bytes: Vec<u8>,
    },
}

/// The part numbered `wanted` (an IMAP section number: a multipart's children `1`, `2`, …,
/// theirs `1.1`, …; a message that is not multipart is `1`) in a provider's tree of parts,
/// given how to read a part's children (`None` for a part that is not multipart).
pub fn section<'a, T>(
    root: &'a T,
    wanted: &str,
    children: &dyn Fn(&'a T) -> Option<&'a [T]>,
) -> Option<&'a T> {
    fn walk<'a, T>(
        part: &'a T,
        number: &str,
        wanted: &str,
        children: &dyn Fn(&'a T) -> Option<&'a [T]>,
    ) -> Option<&'a T> {
        match children(part) {
            Some(inner) => inner.iter().enumerate().find_map(|(n, child)| {
                let child_number = match number {
                    "" => (n + 1).to_string(),
                    _ => format!("{number}.{}", n + 1),
                };
                walk(child, &child_number, wanted, children)
            }),
            None => (number == wanted || number.is_empty() && wanted == "1").then_some(part),
        }
    }
    walk(root, "", wanted, children)
}
