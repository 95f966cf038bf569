//! One attachment read alone: Graph lists a message's attachments without MIME section
//! numbers, so the part asked for is found by what its listing from the message's source said
//! of it (its file name and media type, and which of several so named it is), and its raw
//! contents read with `attachments/{id}/$value`. A part never listed, a forwarded message
//! (an item attachment), or one Graph does not list as named: `None`, and the caller reads
//! the whole message.

use mailbroker_core::{Attachment, FetchedPart, RemoteId, Result};
use serde_json::Value;

use crate::client::Client;
use crate::write::segment;

/// What identifies `part` among `listed`: its name, its media type, and how many listed
/// before it share both.
fn identity<'a>(listed: &'a [Attachment], part: &str) -> Option<(&'a str, &'a str, usize)> {
    let at = listed.iter().position(|a| a.part == part)?;
    let wanted = &listed[at];
    let name = wanted.name.as_deref()?;
    if wanted.content_type.eq_ignore_ascii_case("message/rfc822") {
        return None;
    }
    let alike = |a: &&Attachment| {
        a.name.as_deref() == Some(name) && a.content_type.eq_ignore_ascii_case(&wanted.content_type)
    };
    let before = listed[..at].iter().filter(alike).count();
    Some((name, &wanted.content_type, before))
}

/// The id of the file attachment that is the `nth` named `name` of type `content_type`.
fn attachment_id(list: &Value, (name, content_type, nth): (&str, &str, usize)) -> Option<String> {
    (list["value"].as_array()?.iter())
        .filter(|a| a["@odata.type"] == "#microsoft.graph.fileAttachment")
        .filter(|a| a["name"].as_str() == Some(name))
        .filter(|a| {
            (a["contentType"].as_str()).is_some_and(|t| t.eq_ignore_ascii_case(content_type))
        })
        .nth(nth)
        .and_then(|a| a["id"].as_str().map(str::to_string))
}

pub async fn fetch(
    client: &Client,
    id: &RemoteId,
    part: &str,
    listed: &[Attachment],
) -> Result<Option<FetchedPart>> {
    let Some(wanted) = identity(listed, part) else {
        return Ok(None);
    };
    let message = segment(id);
    let path = format!("me/messages/{message}/attachments?$select=id,name,contentType,size");
    let list = match client.get(&path).await {
        Ok(list) => list,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(attachment) = attachment_id(&list, wanted) else {
        return Ok(None);
    };
    let path = format!("me/messages/{message}/attachments/{attachment}/$value");
    let Some(bytes) = client.get_bytes(&path).await? else {
        return Ok(None);
    };
    Ok(Some(FetchedPart::Decoded {
        name: Some(wanted.0.to_string()),
        content_type: wanted.1.to_string(),
        bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(part: &str, name: Option<&str>, content_type: &str) -> Attachment {
        Attachment {
            part: part.into(),
            name: name.map(str::to_string),
            content_type: content_type.into(),
            size: 1,
        }
    }

    #[test]
    fn a_part_is_the_graph_attachment_of_its_name_and_place_among_its_namesakes() {
        let parts = [
            listed("2", Some("report.pdf"), "application/pdf"),
            listed("3", Some("report.pdf"), "application/pdf"),
            listed("4", None, "message/rfc822"),
            listed("5", None, "image/png"),
        ];
        let file = |id: &str, name: &str| {
            json!({ "@odata.type": "#microsoft.graph.fileAttachment",
            "id": id, "name": name, "contentType": "application/pdf" })
        };
        let list = json!({ "value": [
            { "@odata.type": "#microsoft.graph.itemAttachment", "id": "i", "name": "report.pdf",
              "contentType": "application/pdf" },
            file("a", "report.pdf"), file("b", "report.pdf") ] });
        let id = |part| identity(&parts, part).and_then(|w| attachment_id(&list, w));
        assert_eq!(id("2").as_deref(), Some("a"));
        assert_eq!(id("3").as_deref(), Some("b"));
        assert_eq!(id("4"), None, "a forwarded message is read whole");
        assert_eq!(id("5"), None, "an unnamed part cannot be told apart");
        assert_eq!(id("9"), None);
    }
}
