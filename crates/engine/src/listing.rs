//! What a surface lists, as one caller may see it: accounts with their counts, mailboxes and
//! tags, a page of a search, one message's row, the journal, staged deletions and the
//! summary of a selection. The CLI and MCP call these, never the store's queries, so what a
//! scoped caller may see is decided here once (`Scope`) and not in each surface.
//!
//! The read model is the store's records, declared once where the index maps them and
//! re-exported here: a surface names `listing::ChangeRecord`, never the store.

use mailbroker_core::{AccountId, Error, Result, Summary};
use mailbroker_query::{self as query, Query};
use mailbroker_store::{Store, Touched, no_message, now_secs};

pub use mailbroker_store::{
    AccountRecord, Approval, Asked, ChangeRecord, ChangeStatus, Chosen, Decision, Fallback,
    ItemCounts, ItemStatus, JournalItem, MailboxRecord, Manifest, ManifestItem, ManifestStatus,
    MessageRow, MessageState, SearchPage,
};

use crate::change::Selection;
use crate::scope::Scope;

/// The most journal entries a scoped caller's listing looks among (every account's latest).
const SCOPED_WINDOW: u32 = 1000;

/// One account as listed: its record (never its secret) and how many messages it holds.
#[derive(Debug, Clone)]
pub struct AccountLine {
    pub account: AccountRecord,
    pub messages: i64,
}

/// One account's mailboxes and the tags in use with their message counts.
#[derive(Debug, Clone)]
pub struct Folders {
    pub account: AccountId,
    pub mailboxes: Vec<MailboxRecord>,
    pub tags: Vec<(String, i64)>,
}

/// The journal's latest entries: changes and staged deletions, newest first.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    pub changes: Vec<ChangeRecord>,
    pub manifests: Vec<Manifest>,
}

/// The index as one caller lists it.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    store: &'a Store,
    scope: &'a Scope,
}

impl<'a> Listing<'a> {
    pub fn new(store: &'a Store, scope: &'a Scope) -> Listing<'a> {
        Listing { store, scope }
    }

    /// The accounts a command works on: the one named (`not_found` if unknown or outside
    /// the caller's scope), or every one the caller sees.
    pub async fn accounts_for(&self, account: Option<&AccountId>) -> Result<Vec<AccountId>> {
        let Some(id) = account else {
            let all = self.store.accounts().await?;
            return Ok(all
                .into_iter()
                .map(|a| a.id)
                .filter(|id| self.scope.opens(id))
                .collect());
        };
        Ok(vec![self.account(id).await?.id])
    }

    /// One account's record, `not_found` in the same words when the caller may not see it.
    pub async fn account(&self, id: &AccountId) -> Result<AccountRecord> {
        let next = "list the accounts for their ids (mailbroker account list, or list_accounts)";
        if !self.scope.opens(id) {
            return Err(Error::not_found(format!("no account {id}")).with_next_step(next));
        }
        self.store
            .account(id)
            .await
            .map_err(|e| e.with_next_step(next))
    }

    /// Every account the caller sees, with its message count.
    pub async fn accounts(&self) -> Result<Vec<AccountLine>> {
        let counts = self.store.message_counts().await?;
        let accounts = self.store.accounts().await?;
        Ok(accounts
            .into_iter()
            .filter(|a| self.scope.opens(&a.id))
            .map(|account| AccountLine {
                messages: counts.get(account.id.as_str()).copied().unwrap_or(0),
                account,
            })
            .collect())
    }

    /// The mailboxes and tags of the account named, or of every one the caller sees.
    pub async fn folders(&self, account: Option<&AccountId>) -> Result<Vec<Folders>> {
        let mut out = Vec::new();
        for account in self.accounts_for(account).await? {
            out.push(Folders {
                mailboxes: self.store.mailboxes(&account).await?,
                tags: self.store.tag_catalog(&account).await?,
                account,
            });
        }
        Ok(out)
    }

    /// A page of what `text` selects among the caller's messages (within `account` when
    /// one is named: `not_found` for one the caller may not see, not an empty page).
    pub async fn search(
        &self,
        text: &str,
        account: Option<&AccountId>,
        limit: u32,
        offset: u64,
    ) -> Result<SearchPage> {
        let mut parsed = query::parse(text, now_secs())?;
        if let Some(account) = account {
            let id = self.account(account).await?.id;
            parsed = parsed.in_account(id.as_str());
        }
        self.search_parsed(parsed, limit, offset).await
    }

    /// A page of an already parsed query, narrowed to the caller's accounts.
    pub async fn search_parsed(
        &self,
        parsed: Query,
        limit: u32,
        offset: u64,
    ) -> Result<SearchPage> {
        let parsed = self.scope.narrow(parsed);
        self.store.search_page(&parsed, limit, offset).await
    }

    /// One message's row, as one the index does not hold when the caller may not see it.
    pub async fn message(&self, id: i64) -> Result<MessageRow> {
        let row = self.store.message(id).await?;
        match self.scope.opens(&row.place.account) {
            true => Ok(row),
            false => Err(no_message(id)),
        }
    }

    /// The latest `limit` changes the caller sees (a scoped caller sees a change only when
    /// it sees every account it touched).
    pub async fn changes(&self, limit: u32) -> Result<Vec<ChangeRecord>> {
        Ok(self.journal_of(limit, false).await?.changes)
    }

    /// The latest `limit` changes and staged deletions the caller sees.
    pub async fn journal(&self, limit: u32) -> Result<Journal> {
        self.journal_of(limit, true).await
    }

    async fn journal_of(&self, limit: u32, with_manifests: bool) -> Result<Journal> {
        let fetch = match self.scope {
            Scope::Owner => limit,
            Scope::Accounts { .. } => SCOPED_WINDOW.max(limit),
        };
        let mut journal = Journal {
            changes: self.store.changes(fetch).await?,
            manifests: match with_manifests {
                true => self.store.manifests(&[], fetch).await?,
                false => Vec::new(),
            },
        };
        if *self.scope == Scope::Owner {
            return Ok(journal);
        }
        let change_ids: Vec<i64> = journal.changes.iter().map(|c| c.id).collect();
        let manifest_ids: Vec<i64> = journal.manifests.iter().map(|m| m.id).collect();
        let (by_change, by_manifest) = self.store.accounts_of(&change_ids, &manifest_ids).await?;
        let sees = |touched: &Touched, id: i64| {
            touched
                .get(&id)
                .is_some_and(|accounts| self.scope.sees_all(accounts))
        };
        journal.changes.retain(|c| sees(&by_change, c.id));
        journal.manifests.retain(|m| sees(&by_manifest, m.id));
        journal.changes.truncate(limit as usize);
        journal.manifests.truncate(limit as usize);
        Ok(journal)
    }

    /// Change `id` with its items; one that touched an account the caller may not see is
    /// answered in the words of one that does not exist.
    pub async fn change(&self, id: i64) -> Result<ChangeRecord> {
        let gone = || {
            Error::not_found(format!("no change {id}")).with_next_step(
                "list the changes for their ids (mailbroker changes, or list_changes)",
            )
        };
        let change = self
            .store
            .change(id)
            .await
            .map_err(|e| match e.is_not_found() {
                true => gone(),
                false => e,
            })?;
        self.scope
            .check_all(change.items.iter().map(|i| &i.account), gone)?;
        Ok(change)
    }

    /// Staged deletion `id` (with its items when asked), answered as one that does not
    /// exist when the caller may not see every account it holds.
    pub async fn manifest(&self, id: i64, with_items: bool) -> Result<Manifest> {
        let manifest = self.store.manifest(id, with_items).await?;
        if *self.scope == Scope::Owner {
            return Ok(manifest);
        }
        let (_, touched) = self.store.accounts_of(&[], &[id]).await?;
        let gone = || Error::not_found(format!("no staged deletion {id}"));
        let accounts = touched.get(&id).into_iter().flatten();
        self.scope.check_all(accounts, gone)?;
        Ok(manifest)
    }

    /// The latest `limit` staged deletions in one of `statuses` (every one when empty).
    pub async fn manifests(
        &self,
        statuses: &[ManifestStatus],
        limit: u32,
    ) -> Result<Vec<Manifest>> {
        let mut manifests = self.store.manifests(statuses, limit).await?;
        if *self.scope != Scope::Owner {
            let ids: Vec<i64> = manifests.iter().map(|m| m.id).collect();
            let (_, touched) = self.store.accounts_of(&[], &ids).await?;
            manifests.retain(|m| {
                touched
                    .get(&m.id)
                    .is_some_and(|accounts| self.scope.sees_all(accounts))
            });
        }
        Ok(manifests)
    }

    /// The confirmations an assistant's write waits on a person for. Only the owner sees
    /// them: a write's confirmation may name any account's messages.
    pub async fn waiting(&self) -> Result<Vec<Approval>> {
        match self.scope {
            Scope::Owner => self.store.waiting_approvals().await,
            Scope::Accounts { .. } => Ok(Vec::new()),
        }
    }

    /// The runs of staged deletion `id`, newest first: their outcomes are its report.
    pub async fn manifest_runs(&self, id: i64) -> Result<Vec<ChangeRecord>> {
        self.manifest(id, false).await?;
        self.store.manifest_runs(id).await
    }

    /// The assistant's write whose console page is `page`, decided or not (the owner's only).
    pub async fn waiting_at(&self, page: &str) -> Result<Approval> {
        match self.scope {
            Scope::Owner => self.store.approval_at_page(page).await,
            Scope::Accounts { .. } => Err(mailbroker_core::Error::not_found(
                "no request of an assistant is kept at this address",
            )),
        }
    }

    /// The first `n` of messages `ids` still in the index: what a person is shown as a sample.
    pub async fn sample(&self, ids: &[i64], n: usize) -> Result<Vec<MessageRow>> {
        let mut rows = Vec::new();
        for id in ids {
            if rows.len() == n {
                break;
            }
            match self.message(*id).await {
                Ok(row) => rows.push(row),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rows)
    }

    /// How many of staged deletion `id`'s messages (those still in the index) are of each
    /// month, `YYYY-MM`, oldest first.
    pub async fn manifest_months(&self, id: i64) -> Result<Vec<(String, u64)>> {
        self.manifest(id, false).await?;
        let mut months = std::collections::BTreeMap::<String, u64>::new();
        for date in self.store.manifest_dates(id).await? {
            let d = mail_parser::DateTime::from_timestamp(date);
            *months
                .entry(format!("{:04}-{:02}", d.year, d.month))
                .or_default() += 1;
        }
        Ok(months.into_iter().collect())
    }

    /// A page of staged deletion `id`'s messages still in the index, in its items' order.
    pub async fn manifest_messages(
        &self,
        id: i64,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<MessageRow>, usize)> {
        let manifest = self.manifest(id, true).await?;
        let ids: Vec<i64> = (manifest.items.iter().skip(offset).take(limit))
            .map(|item| item.message_id)
            .collect();
        Ok((self.sample(&ids, limit).await?, manifest.items.len()))
    }

    /// What messages `ids` are, summed up: accounts, mailboxes, senders, months, bytes.
    pub async fn summary(&self, ids: &[i64]) -> Result<Summary> {
        self.store.selection_summary(ids).await
    }

    /// A selection as the caller may make it: a query narrowed to its accounts; ids each of
    /// its accounts, another account's answered as one the index does not hold.
    pub async fn selection(&self, selection: Selection) -> Result<Selection> {
        if *self.scope == Scope::Owner {
            return Ok(selection);
        }
        match selection {
            Selection::Query { text, parsed } => Ok(Selection::Query {
                text,
                parsed: self.scope.narrow(parsed),
            }),
            Selection::Ids(ids) => {
                for found in self.store.existing_refs(&ids).await? {
                    if !self.scope.opens(&found.account) {
                        return Err(no_message(found.id));
                    }
                }
                Ok(Selection::Ids(ids))
            }
        }
    }
}
