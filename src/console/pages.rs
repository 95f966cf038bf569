//! The console's pages, rendered on the server by maud, which escapes every spliced text.
//! Text from mail or from an assistant also goes through `output::one_line` first, so a bidi
//! control or a line break in a subject shows as its picture instead of reordering the page.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use super::{Console, Signed, chart};
use crate::listing::{ChangeRecord, ChangeStatus, Listing, Manifest, ManifestStatus};
use crate::output::{one_line, rfc3339};
use crate::scope::Scope;
use mailbroker_core::DeleteMode;
use mailbroker_core::Error;

/// Messages shown per page of a staged deletion's sample.
const SAMPLE: usize = 25;

pub(super) fn listing(console: &Console) -> Listing<'_> {
    Listing::new(&console.store, &Scope::Owner)
}

/// Text from a server or an assistant, as one line with its controls pictured.
pub(super) fn t(text: &str) -> String {
    one_line(text).into_owned()
}

fn page(title: &str, signed: Option<&Signed>, body: Markup) -> Markup {
    page_with(title, signed, body, false)
}

/// A page; `following` reloads it every second (a run's progress), with no script.
fn page_with(title: &str, signed: Option<&Signed>, body: Markup, following: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if following { meta http-equiv="refresh" content="1"; }
                title { (title) " · mailbroker" }
                link rel="stylesheet" href="/console/style.css";
            }
            body {
                header {
                    strong { "mailbroker" }
                    @if let Some(signed) = signed {
                        nav {
                            a href="/console" { "Waiting for you" }
                            a href="/console/deletions" { "Staged deletions" }
                            a href="/console/rules" { "Rules" }
                            a href="/console/journal" { "Journal" }
                            a href="/console/accounts" { "Accounts" }
                        }
                        form method="post" action="/console/sign-out" {
                            input type="hidden" name="csrf" value=(signed.session.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { h1 { (title) } (body) }
                script src="/console/passkey.js" {}
            }
        }
    }
}

fn answer(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// What a browser that is not signed in is shown.
pub fn signed_out(status: StatusCode) -> Response {
    answer(
        status,
        page(
            "Sign in",
            None,
            html! {
                form method="post" action="/console/sign-in/passkey" data-passkey="sign-in" {
                    button type="submit" { "Sign in with your passkey" }
                    output {}
                }
                p { "Or open a link printed at a terminal, used once:" }
                pre { "mailbroker console link --origin ORIGIN" }
                p.quiet { "(" code { "mailbroker console" } " prints one when it starts.)" }
            },
        ),
    )
}

/// An error, in SPEC §10's words with its next step.
pub fn failure(e: &Error) -> Response {
    let status = match e.error_type() {
        "not_found" => StatusCode::NOT_FOUND,
        "validation_error" => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    answer(
        status,
        page(
            "Not done",
            None,
            html! {
                p.error { strong { (e.error_type()) } ": " (t(e.message())) }
                @if let Some(step) = e.next_step() { p { "Next: " (t(step)) } }
            },
        ),
    )
}

/// A page's body, or its error as a page.
pub(super) fn shown(
    title: &str,
    signed: &Signed,
    body: mailbroker_core::Result<Markup>,
) -> Response {
    match body {
        Ok(body) => answer(StatusCode::OK, page(title, Some(signed), body)),
        Err(e) => failure(&e),
    }
}

/// A decision's form: the page's script asks the passkey, the server checks its answer.
pub(super) fn decision(csrf: &str, action: &str, label: &str) -> Markup {
    html! {
        form method="post" action="/console/act" data-passkey="act" data-action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { (label) }
            output {}
        }
    }
}

/// A printed enrollment link's page: a name for the passkey, and the button.
pub fn enroll(key: &str) -> Response {
    answer(
        StatusCode::OK,
        page(
            "Enroll a passkey",
            None,
            html! {
                p { "This passkey will be what approves, runs and undoes in this console: \
                     your fingerprint, face, PIN or security key." }
                form method="post" action="/console/enroll/finish" data-passkey="enroll" data-key=(key) {
                    label { "Its name " input type="text" name="name" value="my passkey" maxlength="60"; }
                    " "
                    button type="submit" { "Create a passkey" }
                    output {}
                }
            },
        ),
    )
}

pub async fn deletions(State(c): State<Console>, Extension(s): Extension<Signed>) -> Response {
    let body = listing(&c).manifests(&[], 100).await.map(|manifests| {
        html! {
            @if manifests.is_empty() { p.quiet { "No staged deletions." } }
            table {
                thead { tr { th { "#" } th { "status" } th { "mode" } th { "messages" } th { "bytes" } th { "from" } th { "staged" } } }
                tbody {
                    @for m in &manifests {
                        tr {
                            td { a href=(format!("/console/deletions/{}", m.id)) { (m.id) } }
                            td { (m.status.to_string()) } td { (m.mode.as_str()) }
                            td.n { (m.summary.count) } td.n { (m.summary.bytes) }
                            td { (t(&m.origin)) } td { (rfc3339(m.created_at)) }
                        }
                    }
                }
            }
        }
    });
    shown("Staged deletions", &s, body)
}

#[derive(Deserialize)]
pub struct Paged {
    #[serde(default)]
    page: usize,
}

pub async fn deletion(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Path(id): Path<i64>,
    Query(paged): Query<Paged>,
) -> Response {
    let title = format!("Staged deletion {id}");
    let running = c.running.contains(id);
    match deletion_body(&c, id, paged.page, &s.session.csrf, running).await {
        Ok((body, following)) => {
            answer(StatusCode::OK, page_with(&title, Some(&s), body, following))
        }
        Err(e) => failure(&e),
    }
}

/// A staged deletion's page, and whether it follows a run under way.
async fn deletion_body(
    c: &Console,
    id: i64,
    page: usize,
    csrf: &str,
    started_here: bool,
) -> mailbroker_core::Result<(Markup, bool)> {
    let listing = listing(c);
    let m = listing.manifest(id, false).await?;
    let runs = listing.manifest_runs(id).await?;
    let running = started_here || m.status == ManifestStatus::Executing;
    let months = listing.manifest_months(id).await?;
    let (sample, total) = listing
        .manifest_messages(id, page.saturating_mul(SAMPLE), SAMPLE)
        .await?;
    let senders: Vec<(String, u64)> = (m.summary.top_senders.iter())
        .map(|s| (s.from.clone(), s.messages))
        .collect();
    let pages = total.div_ceil(SAMPLE);
    let body = html! {
        (manifest_facts(&m))
        @if running { (progress(&m)) }
        @if !runs.is_empty() { (report(&runs)) }
        div.charts {
            (chart::bars("Messages per month", &months))
            (chart::bars("Messages per sender (the ten who sent most)", &senders))
        }
        h2 { "Its messages (" (total) ")" }
        table {
            thead { tr { th { "date" } th { "from" } th { "subject" } th { "mailbox" } } }
            tbody {
                @for r in &sample {
                    tr {
                        td { (r.date.as_deref().unwrap_or("")) } td { (t(&r.from)) }
                        td { (t(&r.subject)) } td { (t(&r.place.account.to_string())) "/" (t(&r.place.mailbox)) }
                    }
                }
            }
        }
        @if pages > 1 {
            nav.pages {
                @if page > 0 { a href=(format!("/console/deletions/{id}?page={}", page - 1)) { "← newer" } }
                span { "page " (page + 1) " of " (pages) }
                @if page + 1 < pages { a href=(format!("/console/deletions/{id}?page={}", page + 1)) { "older →" } }
            }
        }
        @if m.status.runnable() && !running {
            section.card {
                h2 { "Decide" }
                div.decide {
                    (decision(csrf, &format!("run:{}", m.id), match m.mode {
                        DeleteMode::Trash => "Move them to the trash, with your passkey",
                        DeleteMode::Permanent => "Delete them for good, with your passkey",
                    }))
                    (decision(csrf, &format!("cancel:{}", m.id), "Cancel this deletion"))
                }
                p.quiet { "Or at a terminal: " code { "mailbroker delete-staged " (m.id) } }
            }
        }
    };
    Ok((body, running))
}

/// A run under way: how many of its messages are settled.
fn progress(m: &Manifest) -> Markup {
    let k = &m.counts;
    let total = k.pending + k.done + k.skipped + k.failed + k.moved;
    let settled = total - k.pending;
    html! {
        section.card.running {
            h2 { "Running" }
            progress value=(settled) max=(total) {}
            p { (settled) " of " (total) " messages settled — " (k.to_string()) }
            p.quiet { "This page follows the run until it ends; leaving it does not stop the run." }
        }
    }
}

/// What the runs of a staged deletion did: each run's journal entry and outcomes.
fn report(runs: &[ChangeRecord]) -> Markup {
    html! {
        section.card.report {
            h2 { "Its report" }
            ul {
                @for run in runs {
                    li {
                        a href=(format!("/console/journal/{}", run.id)) { "change " (run.id) }
                        " (" (t(&run.origin)) ", " (rfc3339(run.created_at)) "): " (outcomes(run))
                    }
                }
            }
        }
    }
}

fn manifest_facts(m: &Manifest) -> Markup {
    let s = &m.summary;
    html! {
        dl.facts {
            dt { "status" } dd { (m.status.to_string()) " — its messages: " (m.counts.to_string()) }
            dt { "mode" } dd { (m.mode.as_str()) }
            dt { "messages" } dd { (s.count) " (" (s.bytes) " bytes)" }
            dt { "dates" } dd { (s.first_date.as_deref().unwrap_or("?")) " to " (s.last_date.as_deref().unwrap_or("?")) }
            dt { "chosen by" } dd { code { (t(&serde_json::to_string(&m.selection).unwrap_or_default())) } }
            dt { "staged by" } dd { (t(&m.origin)) ", " (rfc3339(m.created_at)) }
            dt { "mailboxes" } dd {
                @for (mailbox, n) in &s.mailboxes { span.tag { (t(mailbox)) " " (n) } " " }
            }
        }
    }
}

pub async fn journal(State(c): State<Console>, Extension(s): Extension<Signed>) -> Response {
    let body = listing(&c).changes(100).await.map(|changes| {
        html! {
            @if changes.is_empty() { p.quiet { "No changes yet." } }
            table {
                thead { tr { th { "#" } th { "when" } th { "asked by" } th { "what" } th { "outcomes" } } }
                tbody { @for ch in &changes { (change_row(ch)) } }
            }
        }
    });
    shown("Journal", &s, body)
}

fn outcomes(c: &ChangeRecord) -> String {
    let counts: Vec<String> = (c.tally.counts())
        .filter(|(_, n)| *n > 0)
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    let state = match c.status {
        ChangeStatus::Executing => " (not finished)",
        ChangeStatus::Interrupted => " (interrupted)",
        ChangeStatus::Done => "",
    };
    format!("{}{state}", counts.join(", "))
}

fn change_row(c: &ChangeRecord) -> Markup {
    html! {
        tr {
            td { a href=(format!("/console/journal/{}", c.id)) { (c.id) } }
            td { (rfc3339(c.created_at)) } td { (t(&c.origin)) }
            td { code { (t(&serde_json::to_string(&c.patch).unwrap_or_default())) } }
            td { (outcomes(c)) @if let Some(u) = c.undone_by { " · undone by " (u) } }
        }
    }
}

pub async fn change(
    State(c): State<Console>,
    Extension(s): Extension<Signed>,
    Path(id): Path<i64>,
) -> Response {
    let body = listing(&c).change(id).await.map(|ch| {
        html! {
            table { tbody { (change_row(&ch)) } }
            h2 { "Its messages" }
            table {
                thead { tr { th { "message" } th { "account" } th { "outcome" } th { "error" } } }
                tbody {
                    @for i in &ch.items {
                        tr {
                            td { (i.message_id) } td { (i.account.to_string()) }
                            td { span class=(format!("outcome {}", i.outcome.as_str())) { (i.outcome.as_str()) } }
                            td { (t(i.error.as_deref().unwrap_or(""))) }
                        }
                    }
                }
            }
            @if ch.undone_by.is_none() && !ch.patch.is_permanent_deletion() {
                div.decide { (decision(&s.session.csrf, &format!("undo:{}", ch.id), "Undo it, with your passkey")) }
                p.quiet { "Or at a terminal: " code { "mailbroker undo " (ch.id) } }
            }
        }
    });
    shown(&format!("Change {id}"), &s, body)
}

pub async fn accounts(State(c): State<Console>, Extension(s): Extension<Signed>) -> Response {
    shown("Accounts", &s, accounts_body(&c, &s.session.csrf).await)
}

/// Who approves for the home; where only a passkey does, the way back to terminals.
fn approvals_card(approvals: &crate::approvals::Approvals, csrf: &str) -> Markup {
    html! {
        section.card.approvals {
            h2 { "Who approves" }
            @if approvals.passkey_only() {
                p { "Only a passkey in this console approves assistants' writes, runs staged deletions and undoes." }
                div.decide { (decision(csrf, "approvals:person", "Let a person approve at a terminal too, with your passkey")) }
            } @else {
                p { "A person approves at a terminal, here, or in their assistant's client." }
                p.quiet { "To make this console the only way, at a terminal: " code { "mailbroker console approvals passkey" } }
            }
        }
    }
}

async fn accounts_body(c: &Console, csrf: &str) -> mailbroker_core::Result<Markup> {
    let lines = listing(c).accounts().await?;
    let served = crate::freshness::read(&c.store).await?;
    let watch = |id: &str| served.as_ref().and_then(|s| s.accounts.get(id).cloned());
    let approvals = crate::approvals::Approvals::of(&c.store, false).await?;
    let grants = super::grant::grants_card(c, csrf).await?;
    Ok(html! {
        (approvals_card(&approvals, csrf))
        (grants)
        @if lines.is_empty() { p.quiet { "No accounts yet: mailbroker account add …" } }
        table {
            thead { tr { th { "account" } th { "provider" } th { "address" } th { "messages" } th { "last sync" } th { "watched" } } }
            tbody {
                @for line in &lines {
                    @let a = &line.account;
                    @let w = watch(a.id.as_str());
                    tr {
                        td { (a.id.to_string()) } td { (a.provider.as_str()) }
                        td { (t(a.email.as_deref().unwrap_or("-"))) } td.n { (line.messages) }
                        td { (a.last_sync_at.map_or("never".to_string(), rfc3339)) }
                        td {
                            @match &w {
                                None => span.quiet { "no serve is running" },
                                Some(w) => {
                                    (t(&w.watching))
                                    @if let Some(kind) = &w.error_type {
                                        p.error { strong { (t(kind)) } ": " (t(w.error.as_deref().unwrap_or(""))) }
                                    }
                                    @if let Some(step) = &w.next_step { p { "Next: " (t(step)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listing::ItemCounts;

    #[test]
    fn a_run_under_way_shows_how_many_of_its_messages_are_settled() {
        let m = Manifest {
            id: 3,
            created_at: 0,
            origin: "cli".into(),
            selection: crate::store::Chosen::Manifest { manifest: 3 },
            mode: DeleteMode::Trash,
            summary: Default::default(),
            status: ManifestStatus::Executing,
            updated_at: 0,
            executed_at: None,
            counts: ItemCounts {
                pending: 300,
                done: 650,
                failed: 50,
                ..Default::default()
            },
            items: Vec::new(),
        };
        let shown = progress(&m).into_string();
        assert!(
            shown.contains(r#"<progress value="700" max="1000">"#),
            "{shown}"
        );
        assert!(shown.contains("700 of 1000 messages settled"), "{shown}");
    }
}
