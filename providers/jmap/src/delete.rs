//! Staged deletion: each email is read first and deleted only if it is still in the mailbox
//! it was staged in (one gone counts as done, one moved since is left alone); then trash
//! mode moves it to the `trash` role's mailbox (its id stays, so the run undoes) and
//! permanent mode destroys it, each `Email/set` followed in the same request by an
//! `Email/get` of the same emails: in the trash, or not found.

use crate::client::Client;
use crate::convert;
use crate::wire::{Call, GetResponse, PatchObject, SetResponse, nth};
use mailbroker_core::{
    DeleteBatch, DeleteMode, Error, ItemResult, MOVED_SINCE_STAGED, Outcome, RemoteId, Result,
    Version, WriteTarget,
};

/// What a deletion reads of an email, before and after.
const HELD: [&str; 2] = ["mailboxIds", "keywords"];

fn read_held(ids: &[&str]) -> Call {
    Call::email_get(ids, &HELD)
}

/// Deletes one batch of a staged manifest.
pub async fn delete(client: &mut Client, batch: &DeleteBatch) -> Result<Vec<ItemResult>> {
    let source = folder(batch, &batch.mailbox)?;
    let trash = match (batch.mode, &batch.trash) {
        (DeleteMode::Trash, Some(path)) => Some((path.clone(), folder(batch, path)?)),
        (DeleteMode::Trash, None) => {
            return Err(
                Error::not_found("this account has no mailbox with the trash role")
                    .with_next_step("run: mailbroker sync, or stage the deletion with --permanent"),
            );
        }
        (DeleteMode::Permanent, _) => None,
    };
    let mut results = Vec::new();
    let mut live = Vec::new();
    for chunk in batch.targets.chunks(client.limits.max_objects_in_get) {
        let ids: Vec<&str> = chunk.iter().map(|t| t.id.as_str()).collect();
        let answers = client.call(vec![read_held(&ids)]).await?;
        let got: GetResponse<crate::wire::Email> = nth(&answers, 0, "Email/get")?;
        let now = convert::held(&got);
        for t in chunk {
            match now.get(t.id.as_str()) {
                None => results.push(ItemResult::new(t.id.clone(), Outcome::Unchanged)),
                Some(email) if !email.mailboxes.contains(&source) => results.push(moved_since(t)),
                Some(_) => live.push(t),
            }
        }
    }
    for chunk in live.chunks(client.limits.max_objects_in_set) {
        results.extend(send(client, chunk, &source, trash.as_ref()).await);
    }
    Ok(results)
}

/// The provider id of mailbox `path`, as the batch carries it.
fn folder(batch: &DeleteBatch, path: &str) -> Result<String> {
    batch.folders.get(path).cloned().ok_or_else(|| {
        Error::not_found(format!("jmap: no mailbox {path:?} in the index"))
            .with_next_step("run: mailbroker sync, then try again")
    })
}

fn moved_since(t: &WriteTarget) -> ItemResult {
    ItemResult::new(t.id.clone(), Outcome::Stale).with_error(
        Error::stale_state(format!("{MOVED_SINCE_STAGED}; left alone"))
            .with_next_step("run: mailbroker sync, then stage it again where it is now"),
    )
}

/// Sends one chunk's deletion with its read-back; each email's result.
async fn send(
    client: &mut Client,
    chunk: &[&WriteTarget],
    source: &str,
    trash: Option<&(String, String)>,
) -> Vec<ItemResult> {
    let ids: Vec<&str> = chunk.iter().map(|t| t.id.as_str()).collect();
    let set = match trash {
        Some((_, to)) => {
            let mut patch = PatchObject::default();
            patch.mailbox(source, false);
            patch.mailbox(to, true);
            let update = ids.iter().map(|id| (id.to_string(), patch.clone()));
            Call::EmailUpdate(update.collect())
        }
        None => Call::EmailDestroy(ids.iter().map(|id| id.to_string()).collect()),
    };
    let answers = match client.call(vec![set, read_held(&ids)]).await {
        Ok(answers) => answers,
        Err(e) => {
            let e = Error::outcome_unknown(format!("jmap Email/set: {}", e.message()))
                .with_next_step("run: mailbroker delete-staged again: it checks first");
            return every(chunk, Outcome::Unknown, &e);
        }
    };
    let set: SetResponse = match nth(&answers, 0, "Email/set") {
        Ok(set) => set,
        Err(e) => return every(chunk, Outcome::Failed, &e),
    };
    let got: Result<GetResponse<crate::wire::Email>> = nth(&answers, 1, "Email/get");
    let Ok(got) = got else {
        let e = Error::outcome_unknown("jmap: the deletion was sent, but not read back")
            .with_next_step("run: mailbroker delete-staged again: it checks first");
        return every(chunk, Outcome::Unknown, &e);
    };
    let now = convert::held(&got);
    let state = got.state;
    chunk
        .iter()
        .map(|t| deleted(t, &set, now.get(t.id.as_str()), trash, &state))
        .collect()
}

fn every(chunk: &[&WriteTarget], outcome: Outcome, e: &Error) -> Vec<ItemResult> {
    chunk
        .iter()
        .map(|t| ItemResult::new(t.id.clone(), outcome).with_error(e.clone()))
        .collect()
}

/// One email as the server answered its deletion and read it back.
fn deleted(
    t: &WriteTarget,
    set: &SetResponse,
    now: Option<&convert::Held>,
    trash: Option<&(String, String)>,
    state: &str,
) -> ItemResult {
    let id = t.id.as_str();
    let refused = set.not_updated.get(id).or(set.not_destroyed.get(id));
    if let Some(refused) = refused {
        return match refused.kind.as_str() {
            // Gone meanwhile: what was asked.
            "notFound" => ItemResult::new(t.id.clone(), Outcome::Unchanged),
            kind => ItemResult::new(t.id.clone(), Outcome::Failed).with_error(
                Error::provider_write_failed(format!("jmap Email/set refused it: {kind}")),
            ),
        };
    }
    match (trash, now) {
        (None, None) => ItemResult::new(t.id.clone(), Outcome::Applied),
        (Some((path, to)), Some(email)) if email.mailboxes.contains(to) => {
            let mut r = ItemResult::new(t.id.clone(), Outcome::Applied);
            r.moved_to = Some((path.clone(), RemoteId::new(id)));
            r.observed = Some((Version::new(state), email.flags.clone()));
            r
        }
        _ => ItemResult::new(t.id.clone(), Outcome::Failed).with_error(Error::verification_failed(
            "jmap: the email is not where the deletion should have put it",
        )),
    }
}
