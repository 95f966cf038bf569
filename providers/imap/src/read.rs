//! Reading whole messages, for a person or an assistant who asked to see them.

use async_imap::imap_proto::{AttributeValue, Response};
use mailbroker_core::{Error, Result, Uid, UidValidity};

use crate::session::ImapProvider;
use crate::uidset;

impl ImapProvider {
    /// `BODY.PEEK[]` of `uids`: the source as stored, without setting `\Seen`.
    pub(crate) async fn read_sources(
        &mut self,
        mailbox: &str,
        uidvalidity: UidValidity,
        uids: &[Uid],
    ) -> Result<Vec<(Uid, Vec<u8>)>> {
        let selected = self.select(mailbox, false).await?;
        if selected.uid_validity != Some(uidvalidity) {
            return Err(Error::stale_state(format!(
                "mailbox {mailbox:?} was recreated on the server (new UIDVALIDITY)"
            ))
            .with_next_step("run: mailbroker sync, then retry"));
        }
        let mut out = Vec::new();
        for set in uidset::chunks(uids, 40) {
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
                        out.push((uid, body.to_vec()));
                    }
                }
            })
            .await?;
        }
        Ok(out)
    }
}
