//! The rules assistants and people proposed for the accounts' servers: each manifest with
//! the exact text the server will be given, what it would touch today, and who proposed it;
//! a pending one is installed (then its backfill run) or cancelled with the passkey.

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};

use super::pages::{decision, shown, t};
use super::{Console, Signed};
use crate::approvals::Approvals;
use crate::output::rfc3339;
use crate::store::{RuleAction, RuleManifest, RuleStatus};

pub async fn list(State(c): State<Console>, Extension(s): Extension<Signed>) -> Response {
    let body = async {
        let manifests = c.store.rule_manifests().await?;
        let terminal = !Approvals::of(&c.store, false).await?.passkey_only();
        Ok(html! {
            @if manifests.is_empty() { p.quiet { "No rule has been proposed." } }
            @for m in &manifests { (card(m, &s.session.csrf, terminal)) }
        })
    };
    shown("Rules", &s, body.await)
}

fn card(m: &RuleManifest, csrf: &str, terminal: bool) -> Markup {
    let (verb, button) = match m.action {
        RuleAction::Install => ("Install", "Install it, with your passkey"),
        RuleAction::Remove => ("Remove", "Remove it, with your passkey"),
    };
    let status = serde_json::to_value(m.status).unwrap_or_default();
    html! {
        section.card.rule {
            h2 { (verb) " rule " q { (t(&m.rule.name)) } " on " (m.account.to_string()) }
            dl.facts {
                dt { "status" } dd { (status.as_str().unwrap_or("")) @if let Some(id) = m.change_id { " — " a href=(format!("/console/journal/{id}")) { "change " (id) } } }
                @if m.action == RuleAction::Install {
                    dt { "when" } dd { code { (t(&m.rule.query)) } }
                    dt { "then" } dd { (crate::change::words::patch_words(&m.rule.then)) }
                    dt { "today" } dd {
                        (m.matches) " indexed message(s) match"
                        @if m.backfill { ", and will get the same once it is installed" }
                    }
                }
                dt { "proposed by" } dd { (t(&m.origin)) ", " (rfc3339(m.created_at)) }
            }
            details open { summary { "What the server will be given" } pre { (m.provider_text) } }
            @if m.status == RuleStatus::Pending {
                div.decide {
                    (decision(csrf, &format!("rule:{}", m.id), button))
                    (decision(csrf, &format!("drop-rule:{}", m.id), "Cancel"))
                }
                @if terminal {
                    p.quiet { "Or at a terminal: " code { "mailbroker rule approve " (m.id) } }
                }
            }
        }
    }
}
