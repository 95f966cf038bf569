//! "Another IMAP client": what the tests use to seed mail and to check the server's truth
//! independently of mailbroker.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use async_imap::types::Flag;
use futures::TryStreamExt;
use tokio::net::TcpStream;

use crate::dovecot::{Dovecot, PASSWORD};

pub struct ImapClient {
    session: async_imap::Session<TcpStream>,
}

/// A small RFC 5322 message.
pub fn message(i: usize, from: &str, subject: &str, body: &str) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: user@example.test\r\nSubject: {subject}\r\n\
         Date: Mon, 2 Nov 2026 10:{:02}:{:02} +0000\r\nMessage-ID: <m{i}@example.test>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n",
        (i / 60) % 60,
        i % 60
    )
    .into_bytes()
}

/// Message `i` of a conversation about `subject`, from `from`, answering the messages whose
/// ids `refs` holds (oldest first; `<lunch{i}@example.test>`-style ids); its body is
/// `Part {i}`, its date `i` minutes after noon.
pub fn reply(i: usize, from: &str, subject: &str, refs: &[String]) -> String {
    let mut head = format!(
        "From: {from}\r\nTo: dana@example.test\r\nSubject: {}{subject}\r\n\
         Date: Mon, 2 Nov 2026 12:{i:02}:00 +0000\r\nMessage-ID: <lunch{i}@example.test>\r\n",
        if refs.is_empty() { "" } else { "Re: " }
    );
    if let Some(last) = refs.last() {
        head.push_str(&format!(
            "In-Reply-To: {last}\r\nReferences: {}\r\n",
            refs.join(" ")
        ));
    }
    format!("{head}Content-Type: text/plain; charset=utf-8\r\n\r\nPart {i}\r\n")
}

fn flag_name(f: &Flag<'_>) -> Option<String> {
    Some(match f {
        Flag::Seen => "\\Seen".into(),
        Flag::Answered => "\\Answered".into(),
        Flag::Flagged => "\\Flagged".into(),
        Flag::Deleted => "\\Deleted".into(),
        Flag::Draft => "\\Draft".into(),
        Flag::Recent | Flag::MayCreate => return None,
        Flag::Custom(c) => c.to_string(),
    })
}

impl ImapClient {
    /// Logs in as `user` on the plain port.
    pub async fn connect(server: &Dovecot, user: &str) -> Result<ImapClient> {
        Self::connect_port(server.imap_port, user).await
    }

    /// Logs in as `user` on a plain port (the server's, or a proxy's in front of it).
    pub async fn connect_port(port: u16, user: &str) -> Result<ImapClient> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
        // Without this, Nagle's algorithm and delayed ACKs add ~40 ms to every small command.
        tcp.set_nodelay(true)?;
        let mut client = async_imap::Client::new(tcp);
        client
            .read_response()
            .await?
            .ok_or_else(|| anyhow!("no greeting"))?;
        let session = client.login(user, PASSWORD).await.map_err(|(e, _)| e)?;
        Ok(ImapClient { session })
    }

    fn drain(&mut self) {
        while self.session.unsolicited_responses.try_recv().is_ok() {}
    }

    pub async fn append(&mut self, mailbox: &str, flags: &str, body: &[u8]) -> Result<()> {
        let flags = (!flags.is_empty()).then(|| format!("({flags})"));
        self.session
            .append(mailbox, flags.as_deref(), None, body)
            .await?;
        self.drain();
        Ok(())
    }

    pub async fn create(&mut self, mailbox: &str) -> Result<()> {
        self.session.create(mailbox).await?;
        self.drain();
        Ok(())
    }

    pub async fn delete(&mut self, mailbox: &str) -> Result<()> {
        self.session.delete(mailbox).await?;
        self.drain();
        Ok(())
    }

    pub async fn select(&mut self, mailbox: &str) -> Result<async_imap::types::Mailbox> {
        let mb = self.session.select(mailbox).await?;
        self.drain();
        Ok(mb)
    }

    /// `UID FETCH 1:* (FLAGS)`: UID → sorted flags (without the session-only `\Recent`).
    pub async fn flags(&mut self, mailbox: &str) -> Result<BTreeMap<u32, Vec<String>>> {
        let mb = self.select(mailbox).await?;
        let mut out = BTreeMap::new();
        if mb.exists == 0 {
            return Ok(out);
        }
        {
            let mut stream = self.session.uid_fetch("1:*", "(UID FLAGS)").await?;
            while let Some(f) = stream.try_next().await? {
                let uid = f.uid.ok_or_else(|| anyhow!("fetch without uid"))?;
                let mut flags: Vec<String> = f.flags().filter_map(|f| flag_name(&f)).collect();
                flags.sort();
                out.insert(uid, flags);
            }
        }
        self.drain();
        Ok(out)
    }

    /// Every message of `mailbox` as stored, by UID, with its flags (`BODY.PEEK[]`).
    pub async fn sources(
        &mut self,
        mailbox: &str,
    ) -> Result<BTreeMap<u32, (Vec<String>, Vec<u8>)>> {
        let mb = self.select(mailbox).await?;
        let mut out = BTreeMap::new();
        if mb.exists == 0 {
            return Ok(out);
        }
        {
            let mut stream = self
                .session
                .uid_fetch("1:*", "(UID FLAGS BODY.PEEK[])")
                .await?;
            while let Some(f) = stream.try_next().await? {
                let uid = f.uid.ok_or_else(|| anyhow!("fetch without uid"))?;
                let flags = f.flags().filter_map(|f| flag_name(&f)).collect();
                out.insert(uid, (flags, f.body().unwrap_or_default().to_vec()));
            }
        }
        self.drain();
        Ok(out)
    }

    /// The subjects of every message in `mailbox`, sorted.
    pub async fn subjects(&mut self, mailbox: &str) -> Result<Vec<String>> {
        let mb = self.select(mailbox).await?;
        let mut out = Vec::new();
        if mb.exists == 0 {
            return Ok(out);
        }
        {
            let mut stream = self.session.uid_fetch("1:*", "(UID ENVELOPE)").await?;
            while let Some(f) = stream.try_next().await? {
                let subject = f
                    .envelope()
                    .and_then(|e| e.subject.as_ref())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default();
                out.push(subject);
            }
        }
        self.drain();
        out.sort();
        Ok(out)
    }

    /// `UID STORE uid <action> (<flags>)`, e.g. `store("INBOX", 3, "+FLAGS", "\\Flagged")`.
    pub async fn store(
        &mut self,
        mailbox: &str,
        uid: u32,
        action: &str,
        flags: &str,
    ) -> Result<()> {
        self.select(mailbox).await?;
        {
            let mut s = self
                .session
                .uid_store(uid.to_string(), format!("{action} ({flags})"))
                .await?;
            while s.try_next().await?.is_some() {}
        }
        self.drain();
        Ok(())
    }

    /// Expunges exactly these UIDs (`\Deleted` + `UID EXPUNGE`).
    pub async fn expunge(&mut self, mailbox: &str, uids: &[u32]) -> Result<()> {
        let set = uids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        self.select(mailbox).await?;
        {
            let mut s = self
                .session
                .uid_store(&set, "+FLAGS.SILENT (\\Deleted)")
                .await?;
            while s.try_next().await?.is_some() {}
        }
        {
            let s = self.session.uid_expunge(&set).await?;
            futures::pin_mut!(s);
            while s.try_next().await?.is_some() {}
        }
        self.drain();
        Ok(())
    }

    /// Times a raw `UID FETCH 1:* <items>` and returns how many messages came back.
    pub async fn fetch_all(&mut self, mailbox: &str, items: &str) -> Result<u64> {
        self.select(mailbox).await?;
        let mut n = 0;
        {
            let mut stream = self.session.uid_fetch("1:*", items).await?;
            while stream.try_next().await?.is_some() {
                n += 1;
            }
        }
        self.drain();
        Ok(n)
    }

    /// Runs `UID STORE <uid> <query>` once per UID (the per-message path, for comparison).
    pub async fn store_each(&mut self, uids: &[u32], query: &str) -> Result<()> {
        for uid in uids {
            let mut s = self.session.uid_store(uid.to_string(), query).await?;
            while s.try_next().await?.is_some() {}
        }
        self.drain();
        Ok(())
    }

    /// The UIDs of the selected mailbox's messages from sequence number `first` on.
    pub async fn uids_from(&mut self, first: u32) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        {
            let mut stream = self.session.fetch(format!("{first}:*"), "(UID)").await?;
            while let Some(f) = stream.try_next().await? {
                out.extend(f.uid);
            }
        }
        self.drain();
        Ok(out)
    }

    /// The server's own answer to `UID SEARCH <criteria>` in `mailbox`, sorted.
    pub async fn uid_search(&mut self, mailbox: &str, criteria: &str) -> Result<Vec<u32>> {
        self.session.select(mailbox).await?;
        let mut uids: Vec<u32> = self
            .session
            .uid_search(criteria)
            .await?
            .into_iter()
            .collect();
        uids.sort_unstable();
        self.drain();
        Ok(uids)
    }

    /// Runs `UID MOVE <uid> <target>` once per UID (the per-message path, for comparison).
    pub async fn move_each(&mut self, uids: &[u32], target: &str) -> Result<()> {
        for uid in uids {
            self.session.uid_mv(uid.to_string(), target).await?;
        }
        self.drain();
        Ok(())
    }

    /// Runs `UID STORE <set> <query>` once.
    pub async fn store_set(&mut self, set: &str, query: &str) -> Result<()> {
        {
            let mut s = self.session.uid_store(set, query).await?;
            while s.try_next().await?.is_some() {}
        }
        self.drain();
        Ok(())
    }

    pub async fn logout(mut self) -> Result<()> {
        self.session.logout().await?;
        Ok(())
    }
}
