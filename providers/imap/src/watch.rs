//! IDLE (RFC 2177): a session waits on a selected mailbox for the server's announcements of a
//! new message, an expunge or changed flags, then ends the IDLE so the same connection can
//! sync. The caller re-issues it before the server's inactivity timeout (29 minutes at
//! least, RFC 2177 §3).
//!
//! Written on the session's own command and response calls rather than async-imap's IDLE
//! handle, which consumes the session: the provider keeps it for the sync that follows.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_imap::imap_proto::{MailboxDatum, Response};
use mailbroker_core::{Error, Result, Watched};

use crate::connect::{COMMAND_TIMEOUT, imap_error, timed};
use crate::session::{Counters, ImapProvider};

/// What ends an IDLE: the server answered something worth a sync, or not.
fn announces_change(response: &Response<'_>) -> bool {
    matches!(
        response,
        Response::MailboxData(MailboxDatum::Exists(_) | MailboxDatum::Recent(_))
            | Response::Expunge(_)
            | Response::Fetch(..)
            | Response::Vanished { .. }
    )
}

/// One answer read during IDLE, or why there is none.
fn answered<T>(read: std::io::Result<Option<T>>) -> Result<T> {
    read.map_err(|e| Error::provider_unavailable(format!("imap idle: {e}")))?
        .ok_or_else(|| Error::provider_unavailable("imap idle: the connection closed"))
}

impl ImapProvider {
    pub(crate) async fn idle(
        &mut self,
        mailbox: &str,
        timeout: Duration,
        mut stop: Pin<&mut (dyn Future<Output = ()> + Send)>,
    ) -> Result<Watched> {
        if !self.caps.has("IDLE") {
            return Err(Error::unsupported(
                "the server does not offer IDLE; poll it",
            ));
        }
        // EXAMINE: watching changes nothing, not even \Recent.
        self.commands += 2;
        let wire = crate::convert::name_to_wire(mailbox);
        let examined = timed("examine", COMMAND_TIMEOUT, self.session.examine(&wire))
            .await?
            .map_err(|e| imap_error("examine", e))?;
        self.drain_unsolicited();
        // A change that landed after the last sync read the mailbox and before this IDLE
        // began is announced to no one: the mailbox then differs from what the sync read.
        let now = Counters::of_selected(&examined);
        if let Some(synced) = self.synced.get(mailbox)
            && !now.unchanged_since(synced)
        {
            return Ok(Watched::Changed);
        }
        let tag = self
            .session
            .run_command("IDLE")
            .await
            .map_err(|e| imap_error("idle", e))?;
        // Until the server's go-ahead ("+ idling"); a refusal ends the command instead.
        loop {
            let response =
                answered(timed("idle", COMMAND_TIMEOUT, self.session.read_response()).await?)?;
            match response.parsed() {
                Response::Continue { .. } => break,
                Response::Done { tag: t, .. } if *t == tag => {
                    return Err(Error::unsupported("the server refused IDLE; poll it"));
                }
                _ => {}
            }
        }
        let outcome = tokio::select! {
            changed = self.until_announced(timeout) => changed?,
            () = stop.as_mut() => Watched::Stopped,
        };
        self.session
            .run_command_untagged("DONE")
            .await
            .map_err(|e| imap_error("idle done", e))?;
        // Announcements after DONE, then the tagged OK that ends the IDLE.
        let mut outcome = outcome;
        loop {
            let response =
                answered(timed("idle done", COMMAND_TIMEOUT, self.session.read_response()).await?)?;
            match response.parsed() {
                Response::Done { tag: t, .. } if *t == tag => return Ok(outcome),
                other if announces_change(other) && outcome == Watched::Quiet => {
                    outcome = Watched::Changed;
                }
                _ => {}
            }
        }
    }

    /// Reads IDLE's untagged answers until one announces a change (`Changed`) or `timeout`
    /// passes (`Quiet`). Keep-alives (`* OK Still here`) are read and ignored.
    async fn until_announced(&mut self, timeout: Duration) -> Result<Watched> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let answer = match tokio::time::timeout_at(deadline, self.session.read_response()).await
            {
                Err(_) => return Ok(Watched::Quiet),
                Ok(answer) => answer,
            };
            let response = answered(answer)?;
            if announces_change(response.parsed()) {
                return Ok(Watched::Changed);
            }
        }
    }
}
