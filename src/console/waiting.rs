//! The writes assistants wait on the person for: the list, and each one's own page, which is
//! the address an MCP client is given to open (URL-mode elicitation). Each shows what the
//! write will do, to how many messages in which accounts and mailboxes, a sample of them,
//! and which client and session asked.

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, html};

use super::pages::{decision, listing, shown, t};
use super::{Console, Signed};
use crate::approvals::Approvals;
use crate::listing::{Approval, Decision};
use crate::output::rfc3339;

pub async fn list(State(c): State<Console>, Extension(s): Extension<Signed>) -> Response {
    shown("Waiting for you", &s, list_body(&c, &s).await)
}

async fn list_body(c: &Console, s: &Signed) -> mailbroker_core::Result<Markup> {
    let waiting = listing(c).waiting().await?;
    let terminal = terminal(c).await?;
    Ok(html! {
        @if waiting.is_empty() {
            p.quiet { "No assistant is waiting for your yes." }
        }
        @for a in &waiting { (card(a, &s.session.csrf, terminal)) }
    })
}

/// One write's page, decided or not.
pub async fn one(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Path(page): Path<String>,
) -> Response {
    let body = async {
        let a = listing(&c).waiting_at(&page).await?;
        Ok(card(&a, &s.session.csrf, terminal(&c).await?))
    };
    shown("An assistant asks", &s, body.await)
}

/// Whether the terminal's route is offered: not where only a passkey approves.
async fn terminal(c: &Console) -> mailbroker_core::Result<bool> {
    Ok(!Approvals::of(&c.store, false).await?.passkey_only())
}

fn card(a: &Approval, csrf: &str, terminal: bool) -> Markup {
    let d = &a.description;
    let text = |k: &str| t(d[k].as_str().unwrap_or_default());
    let strings = |v: &serde_json::Value| -> Vec<String> {
        (v.as_array().into_iter().flatten())
            .map(|l| t(l.as_str().unwrap_or_default()))
            .collect()
    };
    let plan = strings(&d["plan"]);
    let counts = |k: &str| -> Vec<(String, String)> {
        (d["summary"][k].as_object().into_iter().flatten())
            .map(|(name, n)| (t(name), n.to_string()))
            .collect()
    };
    let senders: Vec<(String, String)> = (d["summary"]["top_senders"].as_array())
        .into_iter()
        .flatten()
        .take(5)
        .map(|s| {
            (
                t(s["from"].as_str().unwrap_or("")),
                s["messages"].to_string(),
            )
        })
        .collect();
    let sample = d["sample"].as_array().cloned().unwrap_or_default();
    let decision_now = a.decision();
    html! {
        section.card {
            h2 { a href=(format!("/console/waiting/{}", a.page())) { "An assistant asks to run " } code { (text("tool")) } }
            p { "It " (text("reason")) "." }
            dl.facts {
                dt { "asked by" } dd { (t(d["client"].as_str().unwrap_or("an unnamed client"))) ", session " code { (text("session")) } }
                dt { "accounts" } dd { @for (name, n) in counts("accounts") { span.tag { (name) " " (n) } " " } }
                dt { "mailboxes" } dd { @for (name, n) in counts("mailboxes") { span.tag { (name) " " (n) } " " } }
                @if !senders.is_empty() {
                    dt { "senders" } dd { @for (from, n) in &senders { span.tag { (from) " " (n) } " " } }
                }
            }
            @if !sample.is_empty() {
                table.sample {
                    thead { tr { th { "date" } th { "from" } th { "subject" } th { "mailbox" } } }
                    tbody {
                        @for m in &sample {
                            tr {
                                td { (m["date"].as_str().unwrap_or("")) } td { (t(m["from"].as_str().unwrap_or(""))) }
                                td { (t(m["subject"].as_str().unwrap_or(""))) } td { (t(m["mailbox"].as_str().unwrap_or(""))) }
                            }
                        }
                    }
                }
            }
            @if !plan.is_empty() {
                details { summary { "The plan" } ul { @for line in &plan { li { code { (line) } } } } }
            }
            @match decision_now {
                Decision::Waiting => {
                    p.quiet { "Waits until " (rfc3339(a.expires_at)) "." }
                    div.decide {
                        (decision(csrf, &format!("approve:{}", a.token), "Approve with your passkey"))
                        (decision(csrf, &format!("decline:{}", a.token), "Decline"))
                    }
                    @if terminal {
                        p.quiet { "Or at a terminal: " code { "mailbroker approve " (a.token) } }
                    }
                }
                other => p.state { "This request is " strong { (other.as_str()) } "." },
            }
        }
    }
}
