//! `mailbroker approve TOKEN`: the person approves, at their terminal, a write an assistant
//! asked to make; the assistant then runs it once with that token.

use mailbroker_core::{Error, Result};

use crate::output::{ask, one_line, print_json};
use crate::store::{Store, now_secs};

pub(super) async fn approve(store: &Store, token: &str, yes: bool, json: bool) -> Result<()> {
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
    if !json || !yes {
        describe(d);
    }
    if !yes {
        confirm_here()?;
    }
    store.approve(token).await?;
    if json {
        return print_json(
            None,
            &serde_json::json!({ "approved": token, "description": d }),
        );
    }
    println!("approved: the assistant may now run this write once");
    Ok(())
}

/// What the write will do, on stderr (stdout may carry JSON).
fn describe(d: &serde_json::Value) {
    let text = |k: &str| d[k].as_str().unwrap_or("").to_string();
    eprintln!(
        "An assistant asks to run {}: it {}.",
        text("tool"),
        one_line(&text("reason"))
    );
    if let Some(summary) = d["summary"]["text"].as_str() {
        eprintln!("{}", one_line(summary));
    }
    for line in d["plan"].as_array().into_iter().flatten() {
        eprintln!("  {}", one_line(line.as_str().unwrap_or("")));
    }
}

fn confirm_here() -> Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return Err(
            Error::confirmation_required("approving needs a terminal, or --yes")
                .with_next_step("run it in a terminal, or add --yes"),
        );
    }
    match ask("Approve this write? [y/N] ")?.as_str() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err(Error::confirmation_declined(
            "not approved; nothing will run",
        )),
    }
}
