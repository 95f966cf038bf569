//! `mailbroker approve TOKEN`: the person approves, at their terminal, a write an assistant
//! asked to make; the assistant then runs it once with that token.

use mailbroker_core::{Error, Result};

use crate::output::{Terminal, print_json};
use crate::store::{Store, now_secs};

/// Approves the write behind `token`, asking the person at the controlling terminal. Nothing
/// else answers: not `--yes`, not stdin. Without a terminal it refuses before the token is
/// even looked up, so a program without one learns nothing about it.
pub(super) async fn approve(store: &Store, token: &str, json: bool) -> Result<()> {
    crate::approvals::Approvals::of(store, false)
        .await?
        .refuse("mailbroker approve")?;
    let mut person = Terminal::open("approving an assistant's write")?;
    let approval = store.approval(token).await?;
    if approval.used_at.is_some() {
        return Err(Error::confirmation_required(format!(
            "confirmation {token} was already used"
        )));
    }
    if approval.expires_at < now_secs() {
        return Err(
            Error::confirmation_required(format!("confirmation {token} has expired"))
                .with_next_step("ask the assistant for a new plan"),
        );
    }
    let d = &approval.description;
    describe(&mut person, d);
    match person.ask("Approve this write? [y/N] ")?.as_str() {
        "y" | "Y" | "yes" => {}
        _ => {
            return Err(Error::confirmation_declined(
                "not approved; nothing will run",
            ));
        }
    }
    store
        .approve(token, crate::store::ApprovedBy::Terminal)
        .await?;
    if json {
        return print_json(
            None,
            &serde_json::json!({ "approved": token, "description": d }),
        );
    }
    crate::say!("approved: the assistant may now run this write once");
    Ok(())
}

/// What the write will do, shown on the terminal the person answers at.
fn describe(person: &mut Terminal, d: &serde_json::Value) {
    let text = |k: &str| d[k].as_str().unwrap_or("").to_string();
    person.say(&format!(
        "An assistant asks to run {}: it {}.",
        text("tool"),
        text("reason")
    ));
    if let Some(summary) = d["summary"]["text"].as_str() {
        person.say(summary);
    }
    for line in d["plan"].as_array().into_iter().flatten() {
        person.say(&format!("  {}", line.as_str().unwrap_or("")));
    }
}
