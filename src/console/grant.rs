//! The consent page of mailbroker's OAuth authorization server: a hosted assistant's client
//! asks for the person's mail, and the person sees which client (its name, where it sends
//! them back, whether they allowed it before), chooses the accounts and read-only or
//! read-write, and allows it with their passkey, or denies it. Either way the browser goes
//! back to the client's redirect URI; a code (kept as a digest, five minutes, used once) only
//! when allowed.

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::Response;
use mailbroker_core::{AccountId, Error, Result};
use maud::html;

use super::decide::Done;
use super::pages::{decision, shown, t};
use super::{Console, Signed};
use crate::oauth::back_to;
use crate::store::AuthRequest;

/// What the person chose, as the passkey's question names it: `ID:r:acct+acct` or
/// `ID:rw:…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub request: String,
    pub allow_writes: bool,
    pub accounts: Vec<AccountId>,
}

impl Choice {
    pub fn parse(text: &str) -> Option<Choice> {
        let mut parts = text.splitn(3, ':');
        let request = parts.next()?.to_string();
        let allow_writes = match parts.next()? {
            "r" => false,
            "rw" => true,
            _ => return None,
        };
        let accounts = (parts.next()?.split('+'))
            .filter(|a| !a.is_empty())
            .map(|a| a.parse().ok())
            .collect::<Option<Vec<AccountId>>>()?;
        let hex = !request.is_empty() && request.bytes().all(|b| b.is_ascii_hexdigit());
        (hex && !accounts.is_empty()).then_some(Choice {
            request,
            allow_writes,
            accounts,
        })
    }
}

fn gone() -> Error {
    Error::not_found(
        "this sign-in request is no longer waiting (it was decided, or ten minutes passed)",
    )
    .with_next_step("start the connection again from the assistant")
}

async fn waiting(c: &Console, id: &str) -> Result<AuthRequest> {
    c.store.auth_request(id).await?.ok_or_else(gone)
}

fn host_of(uri: &str) -> String {
    url::Url::parse(uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| uri.to_string())
}

pub async fn page(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Path(id): Path<String>,
) -> Response {
    let body = async {
        let request = waiting(&c, &id).await?;
        let client = c
            .store
            .oauth_client(&request.client_id)
            .await?
            .ok_or_else(gone)?;
        let seen = c.store.oauth_client_seen(&client.client_id).await?;
        let accounts = c.store.accounts().await?;
        Ok(html! {
            section.card.grant {
                h2 { "Let " q { (t(&client.name)) } " use your mail?" }
                dl.facts {
                    dt { "client" } dd { code { (t(&client.client_id)) } }
                    dt { "sends you back to" } dd { (t(&host_of(&request.redirect_uri))) }
                    dt { "allowed before" } dd { (if seen { "yes" } else { "no: this is the first time" }) }
                    dt { "for" } dd { code { (t(&request.resource)) } }
                }
                form method="post" action="/console/act" data-passkey="act" data-action=(format!("grant:{id}")) data-choices {
                    input type="hidden" name="csrf" value=(s.session.csrf);
                    fieldset {
                        legend { "Accounts it may see" }
                        @for a in &accounts {
                            label { input type="checkbox" name="account" value=(a.id.as_str()); " " (a.id.as_str()) @if let Some(e) = &a.email { " (" (t(e)) ")" } }
                        }
                    }
                    fieldset {
                        legend { "What it may do" }
                        label { input type="radio" name="mode" value="r" checked; " read only" }
                        label { input type="radio" name="mode" value="rw"; " read and change (each change still asks you)" }
                    }
                    button type="submit" { "Allow, with your passkey" }
                    output {}
                }
                (decision(&s.session.csrf, &format!("deny-grant:{id}"), "Deny"))
            }
        })
    };
    shown("Connect an assistant", &s, body.await)
}

fn check(c: &Choice, known: &[AccountId]) -> Result<()> {
    match c.accounts.iter().find(|a| !known.contains(a)) {
        Some(a) => Err(Error::not_found(format!("there is no account {a}"))),
        None => Ok(()),
    }
}

/// Whether the request still waits (before the passkey is asked).
pub async fn applies(c: &Console, request: &str) -> Result<()> {
    waiting(c, request).await.map(drop)
}

/// The person allowed it: a grant, and the browser back to the client with its code.
pub async fn allow(c: &Console, choice: &Choice) -> Result<Done> {
    let request = waiting(c, &choice.request).await?;
    let known: Vec<AccountId> = c
        .store
        .accounts()
        .await?
        .into_iter()
        .map(|a| a.id)
        .collect();
    check(choice, &known)?;
    if !c.store.end_auth_request(&request.id).await? {
        return Err(gone());
    }
    let code = crate::util::random_hex(32)?;
    (c.store)
        .grant_code(&request, &choice.accounts, choice.allow_writes, &code)
        .await?;
    let to = back_to(
        &request.redirect_uri,
        &[("code", &code)],
        request.state.as_deref(),
        &c.origin.url,
    );
    Ok(Done {
        message: format!("allowed: back to {}", host_of(&request.redirect_uri)),
        location: Some(to),
    })
}

/// The person denied it: the browser back to the client with `access_denied`.
pub async fn deny(c: &Console, id: &str) -> Result<Done> {
    let request = waiting(c, id).await?;
    c.store.end_auth_request(id).await?;
    let to = back_to(
        &request.redirect_uri,
        &[
            ("error", "access_denied"),
            ("error_description", "the person denied it"),
        ],
        request.state.as_deref(),
        &c.origin.url,
    );
    Ok(Done {
        message: "denied".into(),
        location: Some(to),
    })
}

/// The assistants connected by OAuth: each grant's client, accounts and mode, ended with the
/// passkey.
pub async fn grants_card(c: &Console, csrf: &str) -> Result<maud::Markup> {
    let grants = c.store.grants().await?;
    Ok(html! {
        section.card.grants {
            h2 { "Assistants connected by OAuth" }
            @if grants.is_empty() { p.quiet { "None." } }
            @for (g, client) in &grants {
                @let accounts: Vec<&str> = g.accounts.iter().map(AccountId::as_str).collect();
                div.grant {
                    p {
                        strong { (t(client)) } " — " (accounts.join(", ")) ", "
                        (if g.allow_writes { "read and change" } else { "read only" })
                        ", since " (crate::output::rfc3339(g.created_at)) " (" code { "oauth-" (g.id) } ")"
                    }
                    (decision(csrf, &format!("revoke-grant:{}", g.id), "Revoke, with your passkey"))
                }
            }
        }
    })
}

/// Ends grant `id` and its tokens.
pub async fn revoke(c: &Console, id: i64) -> Result<Done> {
    if !c.store.revoke_grant(id).await? {
        return Err(Error::not_found(format!("no live grant oauth-{id}")));
    }
    Ok(Done {
        message: format!("oauth-{id} revoked: its tokens open nothing from now on"),
        location: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_names_its_request_mode_and_accounts() {
        let c = Choice::parse("ab12:rw:work+home").unwrap();
        assert!(c.allow_writes);
        assert_eq!(c.accounts.len(), 2);
        for bad in [
            "ab12:rw:",
            "ab12:x:work",
            "zz:r:work",
            ":r:work",
            "ab12:r:wo rk",
        ] {
            assert!(Choice::parse(bad).is_none(), "{bad}");
        }
    }
}
