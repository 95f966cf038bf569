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
