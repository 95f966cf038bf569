//! One attachment read alone: the email's body structure numbered as IMAP numbers sections
//! (a multipart's children `1`, `2`, …, theirs `1.1`, …; a message that is not multipart is
//! `1`; a forwarded `message/rfc822` is one part), and that part's blob downloaded, which
//! JMAP serves decoded (RFC 8621 §4.1.4).

use mailbroker_core::{FetchedPart, RemoteId, Result};
use serde_json::Value;

use crate::client::Client;
use crate::wire::{Call, nth};

/// The part numbered `wanted` in an email's body structure.
fn find<'a>(structure: &'a Value, wanted: &str) -> Option<&'a Value> {
    let children = |part: &'a Value| -> Option<&'a [Value]> {
        let is_multipart = part["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("multipart/"));
        (part["subParts"].as_array())
            .filter(|c| is_multipart && !c.is_empty())
            .map(Vec::as_slice)
    };
    mailbroker_core::section(structure, wanted, &children)
}

pub async fn fetch(
    client: &mut Client,
    id: &RemoteId,
    wanted: &str,
) -> Result<Option<FetchedPart>> {
    let answers = client
        .call(vec![Call::EmailParts(id.as_str().to_string())])
        .await?;
    let got: Value = nth(&answers, 0, "Email/get")?;
    let Some(part) = find(&got["list"][0]["bodyStructure"], wanted) else {
        return Ok(None);
    };
    let Some(blob) = part["blobId"].as_str() else {
        return Ok(None);
    };
    let bytes = client.download(blob).await?;
    Ok(Some(FetchedPart::Decoded {
        name: part["name"].as_str().map(str::to_string),
        content_type: part["type"]
            .as_str()
            .unwrap_or("application/octet-stream")
            .to_string(),
        bytes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_numbered_as_imap_sections() {
        let structure = json!({ "type": "multipart/mixed", "subParts": [
            { "type": "multipart/alternative", "subParts": [
                { "type": "text/plain", "blobId": "t" }, { "type": "text/html", "blobId": "h" } ] },
            { "type": "application/pdf", "blobId": "p", "name": "bill.pdf" },
            { "type": "message/rfc822", "blobId": "m" } ] });
        assert_eq!(find(&structure, "1.2").unwrap()["blobId"], "h");
        assert_eq!(find(&structure, "2").unwrap()["blobId"], "p");
        assert_eq!(find(&structure, "3").unwrap()["blobId"], "m");
        assert!(find(&structure, "4").is_none());
        assert!(
            find(&structure, "1").is_none(),
            "a multipart is no attachment"
        );
        let single = json!({ "type": "application/pdf", "blobId": "s" });
        assert_eq!(find(&single, "1").unwrap()["blobId"], "s");
    }
}
