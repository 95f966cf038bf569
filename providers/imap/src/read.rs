//! Reading whole messages, for a person or an assistant who asked to see them.

use async_imap::imap_proto::{AttributeValue, Response};
use mailbroker_core::{Error, RemoteId, Result};

use crate::ids::{self, Uid};

use crate::session::ImapProvider;
use crate::uidset;

impl ImapProvider {
    /// `BODY.PEEK[]` of `ids`: the source as stored, without setting `\Seen`.
    pub(crate) async fn read_sources(
        &mut self,
        mailbox: &str,
        ids: &[RemoteId],
    ) -> Result<Vec<(RemoteId, Vec<u8>)>> {
        let Some((uidvalidity, _)) = ids.first().and_then(ids::parse) else {
            return Ok(Vec::new());
        };
        let uids: Vec<Uid> = ids
            .iter()
            .filter_map(|id| ids::uid_in(id, uidvalidity))
            .collect();
        let selected = self.select(mailbox, false).await?;
        if selected.uid_validity != Some(uidvalidity) {
            return Err(Error::stale_state(format!(
                "mailbox {mailbox:?} was recreated on the server (new UIDVALIDITY)"
            ))
            .with_next_step("run: mailbroker sync, then retry"));
        }
        let mut out = Vec::new();
        for set in uidset::chunks(&uids, 40) {
            self.command(&format!("UID FETCH {set} (UID BODY.PEEK[])"), |resp| {
                if let Response::Fetch(_, attrs) = resp {
                    let uid = attrs.iter().find_map(|a| match a {
                        AttributeValue::Uid(u) => Some(Uid::from(*u)),
                        _ => None,
                    });
                    let body = attrs.iter().find_map(|a| match a {
                        AttributeValue::BodySection { data, .. } => data.as_ref(),
                        _ => None,
                    });
                    if let (Some(uid), Some(body)) = (uid, body) {
                        out.push((ids::remote(uidvalidity, uid), body.to_vec()));
                    }
                }
            })
            .await?;
        }
        Ok(out)
    }
}

impl ImapProvider {
    /// `BODY.PEEK[part.MIME]` and `BODY.PEEK[part]` of one message: the part's own header and
    /// body, without the rest of the message. `None` when the message or part is not there.
    pub(crate) async fn read_part(
        &mut self,
        mailbox: &str,
        id: &RemoteId,
        part: &str,
    ) -> Result<Option<Vec<u8>>> {
        if part.is_empty()
            || !part
                .split('.')
                .all(|n| n.parse::<u32>().is_ok_and(|n| n > 0))
        {
            return Ok(None);
        }
        let Some((uidvalidity, uid)) = ids::parse(id) else {
            return Ok(None);
        };
        let selected = self.select(mailbox, false).await?;
        if selected.uid_validity != Some(uidvalidity) {
            return Ok(None);
        }
        let (mut header, mut body) = (None, None);
        let command = format!("UID FETCH {uid} (UID BODY.PEEK[{part}.MIME] BODY.PEEK[{part}])");
        self.command(&command, |resp| {
            if let Response::Fetch(_, attrs) = resp {
                for a in attrs {
                    if let AttributeValue::BodySection {
                        section,
                        data: Some(data),
                        ..
                    } = a
                    {
                        let is_mime = matches!(
                            section,
                            Some(async_imap::imap_proto::SectionPath::Part(
                                _,
                                Some(async_imap::imap_proto::MessageSection::Mime)
                            ))
                        );
                        match is_mime {
                            true => header = Some(data.to_vec()),
                            false => body = Some(data.to_vec()),
                        }
                    }
                }
            }
        })
        .await?;
        Ok(match (header, body) {
            // A part the message does not have is answered empty (or NIL).
            (Some(mut header), Some(body)) if !header.is_empty() => {
                header.extend_from_slice(&body);
                Some(header)
            }
            _ => None,
        })
    }
}
