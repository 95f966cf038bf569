//! One attachment read alone: the message's tree of parts (`format=full`) numbered as IMAP
//! numbers sections, and that part's body: inline when small, else by its attachment id
//! (`messages.attachments.get`), which Gmail serves decoded.

use google_gmail1::api::MessagePart;
use mailbroker_core::{FetchedPart, RemoteId, Result};

use crate::api;
use crate::client::Client;

/// The part numbered `wanted` in a message's payload.
fn find<'a>(payload: &'a MessagePart, wanted: &str) -> Option<&'a MessagePart> {
    let children = |part: &'a MessagePart| -> Option<&'a [MessagePart]> {
        let is_multipart = (part.mime_type.as_deref()).is_some_and(|t| t.starts_with("multipart/"));
        (part.parts.as_deref()).filter(|c| is_multipart && !c.is_empty())
    };
    mailbroker_core::section(payload, wanted, &children)
}

pub async fn fetch(client: &Client, id: &RemoteId, wanted: &str) -> Result<Option<FetchedPart>> {
    let payload = match api::parts(client, id.as_str()).await {
        Ok(Some(payload)) => payload,
        Ok(None) => return Ok(None),
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(part) = find(&payload, wanted) else {
        return Ok(None);
    };
    let body = part.body.clone().unwrap_or_default();
    let bytes = match (body.attachment_id, body.data) {
        (Some(attachment), _) => api::attachment(client, id.as_str(), &attachment).await?,
        (None, Some(data)) => data,
        (None, None) => return Ok(None),
    };
    Ok(Some(FetchedPart::Decoded {
        name: part.filename.clone().filter(|n| !n.is_empty()),
        content_type: (part.mime_type.clone()).unwrap_or_else(|| "application/octet-stream".into()),
        bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(mime: &str, id: &str, parts: Vec<MessagePart>) -> MessagePart {
        MessagePart {
            mime_type: Some(mime.into()),
            part_id: Some(id.into()),
            parts: (!parts.is_empty()).then_some(parts),
            ..Default::default()
        }
    }

    #[test]
    fn parts_are_numbered_as_imap_sections() {
        let payload = part(
            "multipart/mixed",
            "",
            vec![
                part(
                    "multipart/alternative",
                    "0",
                    vec![
                        part("text/plain", "0.0", vec![]),
                        part("text/html", "0.1", vec![]),
                    ],
                ),
                part("application/pdf", "1", vec![]),
                part("message/rfc822", "2", vec![]),
            ],
        );
        let id = |wanted| find(&payload, wanted).and_then(|p| p.part_id.clone());
        assert_eq!(id("1.2").as_deref(), Some("0.1"));
        assert_eq!(id("2").as_deref(), Some("1"));
        assert_eq!(id("3").as_deref(), Some("2"));
        assert_eq!(id("1"), None, "a multipart is no attachment");
        assert_eq!(id("4"), None);
        let single = part("application/pdf", "", vec![]);
        assert!(find(&single, "1").is_some());
    }
}
