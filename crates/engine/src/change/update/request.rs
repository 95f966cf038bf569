//! A change request resolved once. `check` parses the selection and applies every touched
//! account's rules (nothing read but the places and account rows); `resolve` reads the
//! targets, works out what each still needs and plans the batches. The one
//! `ResolvedRequest` then serves the dry run, the confirmation and the run: nothing is
//! parsed, checked or planned twice.

use super::*;
use crate::registry::AccountAdapter;

use crate::change::Selection;
use mailbroker_core::Grouping;

/// An update checked against every account it touches, its targets not read yet: sessions
/// opened ahead (`places`) connect while `resolve` reads them.
pub struct CheckedRequest {
    selection: Selection,
    patch: Patch,
    places: Vec<(AccountId, String)>,
    /// The rows of the accounts it touches, read once here for every later step.
    records: Records,
    targets: HashMap<AccountId, String>,
    move_role: Option<Role>,
}

impl CheckedRequest {
    /// Checks `patch` against each account the selection touches: tags against the
    /// provider's rules, what the account can do, the move target resolved from a name or a
    /// role. Nothing is sent to a server.
    pub async fn check(
        store: &Store,
        selection: &Selection,
        patch: &Patch,
    ) -> Result<CheckedRequest> {
        let places = store
            .selection_places(selection.ids(), selection.query())
            .await?;
        let accounts = places.iter().map(|(a, _)| a.clone()).collect();
        let records = records_of(store, accounts).await?;
        let (targets, move_role) = check_request(store, &records, patch).await?;
        Ok(CheckedRequest {
            selection: selection.clone(),
            patch: patch.clone(),
            places,
            records,
            targets,
            move_role,
        })
    }

    /// The (account, mailbox) pairs the selection touches.
    pub fn places(&self) -> &[(AccountId, String)] {
        &self.places
    }

    /// The rows of the accounts the selection touches.
    pub(crate) fn records(&self) -> &Records {
        &self.records
    }

    /// Refuses tags to add that the touched accounts do not know (see `require_known_tags`).
    pub async fn require_known_tags(&self, store: &Store) -> Result<()> {
        require_known_tags(store, &self.records, &self.patch).await
    }

    /// Reads the targets, works out what each still needs, and plans the batches.
    pub async fn resolve(self, store: &Store) -> Result<ResolvedRequest> {
        let started = std::time::Instant::now();
        let (selection, rows) = self.selection.rows(store).await?;
        let intents: Vec<Intent> = rows
            .into_iter()
            .map(|row| intent_of(row, &self.patch, &self.targets))
            .collect();
        let requested = FlagOp {
            read: self.patch.read,
            flagged: self.patch.flagged,
            add_tags: self.patch.add_tags.clone(),
            remove_tags: self.patch.remove_tags.clone(),
        };
        let request = Recorded {
            selection,
            asked: Asked::Patch(self.patch),
            undo_of: None,
        };
        let mut resolved = plan(
            store,
            request,
            (self.records, Some(&requested)),
            intents,
            Vec::new(),
        )
        .await?;
        resolved.set_move_role(self.move_role);
        resolved.resolve_ms = started.elapsed().as_millis() as u64;
        resolved.preview.local_ms = resolved.resolve_ms;
        Ok(resolved)
    }
}

/// A change ready to run: its intents, their batches and the plan, and the report a dry
/// run shows (`preview`). Running it journals and sends exactly what was previewed.
pub struct ResolvedRequest {
    request: Recorded,
    intents: Vec<Intent>,
    groups: Vec<Group>,
    /// Messages found stale while resolving (an undo's, changed since): reported, not sent.
    stale: Vec<Failure>,
    preview: ChangeReport,
    resolve_ms: u64,
    /// The rows of the accounts it touches, for its sessions.
    records: Records,
}

/// Builds the batches of `intents` and their plan: a `ResolvedRequest`. `records` are the
/// rows of the accounts already read (an update's check read them all; an undo's are read
/// here); `requested` is the flag part every message was asked for (an update's; an undo's
/// differ per message), which accounts whose adapter groups `Whole` batch under.
pub(crate) async fn plan(
    store: &Store,
    request: Recorded,
    (known, requested): (Records, Option<&FlagOp>),
    intents: Vec<Intent>,
    stale: Vec<Failure>,
) -> Result<ResolvedRequest> {
    let started = std::time::Instant::now();
    let missing: Vec<AccountId> = intents
        .iter()
        .map(|i| i.row.account.clone())
        .filter(|a| !known.contains_key(a))
        .collect();
    let mut records = records_of(store, missing).await?;
    records.extend(known);
    let mut whole = HashMap::new();
    for (account, known) in &records {
        if let (Grouping::Whole, Some(op)) = (known.record.adapter()?.grouping(), requested) {
            whole.insert(account.clone(), op.clone());
        }
    }
    // Each batch is built once: for the plan, then to send.
    let mut groups: Vec<Group> = Vec::new();
    let mut plan = Vec::new();
    for (key, members) in batches(&intents, &whole) {
        let account = key.account.clone();
        let Some(known) = records.get(&account) else {
            return Err(Error::internal(format!("account {account} was not read")));
        };
        let synced = match key.mailbox.is_empty() {
            true => common_cursor(&known.mailboxes, &intents, &members),
            false => known.mailboxes.cursor(&key.mailbox),
        };
        let move_synced = match &key.move_to {
            Some(target) => known.mailboxes.cursor(target),
            None => MailboxCursor::default(),
        };
        let mut batch = batch_of(key, &intents, &members, (synced, move_synced));
        let named: Vec<&str> = std::iter::once(batch.mailbox.as_str())
            .filter(|m| !m.is_empty())
            .chain(batch.move_to.as_deref())
            .collect();
        batch.folders = known.mailboxes.folder_ids(&named);
        plan.extend(known.record.adapter()?.plan(&known.record.info(), &batch));
        groups.push(Group {
            account,
            members,
            batch,
        });
    }
    let planned = intents.iter().filter(|i| i.changes_something()).count() as u64;
    let mut preview = ChangeReport {
        dry_run: true,
        plan,
        planned,
        local_ms: started.elapsed().as_millis() as u64,
        ..ChangeReport::default()
    };
    preview
        .tally
        .set(Outcome::Unchanged, intents.len() as u64 - planned);
    add_stale(&mut preview, &stale);
    tracing::debug!(ms = preview.local_ms, "write: planned");
    Ok(ResolvedRequest {
        request,
        intents,
        groups,
        stale,
        preview,
        resolve_ms: 0,
        records,
    })
}

fn add_stale(report: &mut ChangeReport, stale: &[Failure]) {
    report.tally.add_n(Outcome::Stale, stale.len() as u64);
    report.failures.extend(stale.iter().cloned());
}

impl ResolvedRequest {
    /// What a dry run reports: the plan, and how many messages would change.
    pub fn preview(&self) -> &ChangeReport {
        &self.preview
    }

    /// What a dry run reports, the request itself no longer needed.
    pub fn into_preview(self) -> ChangeReport {
        self.preview
    }

    /// Records the role of where it moves messages (`junk`, `trash`), which decides whether a
    /// person must confirm it.
    pub(crate) fn set_move_role(&mut self, role: Option<Role>) {
        self.preview.move_role = role;
    }

    /// The role of where it moves messages, as an update's target has one: junk or trash
    /// first (an undo that took mail out of them puts it back there, which a person
    /// confirms as they would the same update), else any other.
    pub(crate) fn targets_role(&self) -> Option<Role> {
        let mut found = None;
        for intent in &self.intents {
            let Some(target) = &intent.move_to else {
                continue;
            };
            let known = self.records.get(&intent.row.account);
            // A mailbox gone since has no role here: the write itself will say so.
            let role = known.and_then(|k| k.mailboxes.resolve(target).ok()?.1);
            if role.is_some_and(Role::needs_confirmation) {
                return role;
            }
            found = found.or(role);
        }
        found
    }

    /// Messages that need a change, by account.
    pub fn planned_by_account(&self) -> BTreeMap<AccountId, u64> {
        let mut out = BTreeMap::new();
        for intent in self.intents.iter().filter(|i| i.changes_something()) {
            *out.entry(intent.row.account.clone()).or_default() += 1;
        }
        out
    }

    /// The local ids of every message the request selected.
    pub fn ids(&self) -> Vec<i64> {
        self.intents.iter().map(|i| i.row.id).collect()
    }

    /// The selection as the journal records it.
    pub fn selection(&self) -> &mailbroker_store::Chosen {
        &self.request.selection
    }

    /// Journals the intent, sends the batches on `sessions`, verifies and journals the
    /// results (`execute`); a request that needs nothing sends nothing.
    pub async fn run(
        self,
        sessions: Sessions,
        store: &Store,
        origin: &str,
        follow: &crate::change::Follow,
    ) -> Result<ChangeReport> {
        let request = (origin.to_string(), self.request);
        let plan = &self.preview.plan;
        let sessions = sessions.knowing(rows_of(&self.records));
        let mut report = execute(
            sessions,
            store,
            request,
            plan,
            (&self.intents, &self.groups),
            follow,
        )
        .await?;
        report.move_role = self.preview.move_role;
        report.local_ms += self.resolve_ms + self.preview.local_ms;
        add_stale(&mut report, &self.stale);
        Ok(report)
    }
}

/// The cursor a batch across mailboxes (`members`, of `account`) was synced at: the one its
/// mailboxes share, as an account-wide sync leaves them; else none (cursors are opaque, so
/// no older one can be picked), and the provider checks from its targets' versions.
fn common_cursor(
    mailboxes: &mailbroker_store::Mailboxes,
    intents: &[Intent],
    members: &[usize],
) -> MailboxCursor {
    let names: std::collections::BTreeSet<&str> = members
        .iter()
        .map(|i| intents[*i].row.mailbox.as_str())
        .collect();
    let cursors: std::collections::BTreeSet<MailboxCursor> = names
        .into_iter()
        .map(|name| mailboxes.cursor(name))
        .collect();
    match cursors.len() {
        1 => cursors.into_iter().next().unwrap_or_default(),
        _ => MailboxCursor::default(),
    }
}
