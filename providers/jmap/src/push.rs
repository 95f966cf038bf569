//! Push (RFC 8620 §7.3): the session's event source announces each new state of the
//! account's emails and mailboxes as a `state` event. `watch` waits on one stream for a
//! state other than the ones the last sync reached (a server may begin a stream with the
//! current states, which are not a change). A server that answers the event source with
//! 204, or whose session has none, does not push: `unsupported`, and the caller polls.

use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt;
use mailbroker_core::{Error, Result, Watched};
use sse_stream::SseStream;

use crate::client::Client;
use crate::wire::StateChange;

/// Seconds between the server's pings, which keep proxies from closing a quiet stream.
const PING: u64 = 60;

/// The states the last sync reached, which a `state` event is compared with.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub email: String,
    pub mailbox: String,
}

/// Waits for a state other than `known`, for at most `timeout`, or until `stop`.
pub async fn watch(
    client: &mut Client,
    known: &Known,
    timeout: Duration,
    mut stop: Pin<&mut (dyn Future<Output = ()> + Send)>,
) -> Result<Watched> {
    let Some(template) = client.event_source.clone() else {
        return Err(Error::unsupported(
            "this JMAP session has no event source; poll it",
        ));
    };
    let url = expand(&template);
    // The request outlives the wait a little, so the wait ends it, not the timeout.
    let response = client
        .events(&url, timeout + Duration::from_secs(5))
        .await?;
    let Some(response) = response else {
        return Err(Error::unsupported(
            "the JMAP event source answered 204 No Content (it does not push); poll it",
        ));
    };
    let mut events = SseStream::from_bytes_stream(response.bytes_stream());
    let account = client.account_id.clone();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = &mut deadline => return Ok(Watched::Quiet),
            () = stop.as_mut() => return Ok(Watched::Stopped),
        };
        let event = match event {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                return Err(Error::provider_unavailable(format!("jmap events: {e}")));
            }
            None => {
                return Err(Error::provider_unavailable(
                    "jmap events: the server closed the event stream",
                ));
            }
        };
        if event.event.as_deref() == Some("state")
            && changed(event.data.as_deref(), &account, known)
        {
            return Ok(Watched::Changed);
        }
    }
}

/// The event source URL with its template variables filled: email and mailbox changes,
/// the stream kept open, a ping every `PING` seconds.
fn expand(template: &str) -> String {
    template
        .replace("{types}", "Email,Mailbox")
        .replace("{closeafter}", "no")
        .replace("{ping}", &PING.to_string())
}

/// Whether a `state` event's `StateChange` shows the account's emails or mailboxes in a
/// state other than `known`. One that cannot be read counts as a change: a sync tells.
fn changed(data: Option<&str>, account: &str, known: &Known) -> bool {
    let Some(change) = data.and_then(|d| serde_json::from_str::<StateChange>(d).ok()) else {
        return true;
    };
    let Some(states) = change.changed.get(account) else {
        return false;
    };
    let differs = |kind: &str, ours: &str| states.get(kind).is_some_and(|s| s != ours);
    differs("Email", &known.email) || differs("Mailbox", &known.mailbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_state_other_than_the_synced_one_is_a_change() {
        let known = Known {
            email: "10".into(),
            mailbox: "4".into(),
        };
        let event = |email: &str, mailbox: &str| {
            format!(
                r#"{{"@type":"StateChange","changed":{{"u1":{{"Email":"{email}","Mailbox":"{mailbox}"}}}}}}"#
            )
        };
        assert!(!changed(Some(&event("10", "4")), "u1", &known));
        assert!(changed(Some(&event("11", "4")), "u1", &known));
        assert!(changed(Some(&event("10", "5")), "u1", &known));
        assert!(!changed(Some(&event("11", "5")), "another", &known));
        assert!(changed(Some("not json"), "u1", &known));
    }

    #[test]
    fn the_template_asks_for_emails_and_mailboxes_kept_open() {
        let url = expand("https://x/events?types={types}&closeafter={closeafter}&ping={ping}");
        assert_eq!(
            url,
            "https://x/events?types=Email,Mailbox&closeafter=no&ping=60"
        );
    }
}
