//! Accounts locked and connected for a write or a deletion.
//!
//! A write that will run without asking anyone (`update --yes`) opens its sessions ahead:
//! each account is locked, connected, and its one mailbox selected while the targets are
//! read and planned. The greeting, login and select round trips then overlap that local work
//! instead of following it (about 50 ms of reading and planning for 10,000 messages against
//! four round trips).
//!
//! Architecture Invariant: sessions are opened ahead only after the request was checked
//! against every account it touches (`change::CheckedRequest::check`), so a request refused as invalid
//! never reaches a server. A session opened ahead sends nothing but its login and select
//! until a batch runs on it.

use std::collections::BTreeMap;

use mailbroker_core::{AccountId, Error, Provider, Result};
use tokio::task::JoinHandle;

use crate::registry;
use mailbroker_store::{AccountLock, AccountRecord, LOCK_WAIT, Store};

/// One account's connection, held under its lock.
pub struct Session {
    lock: AccountLock,
    pub provider: Box<dyn Provider>,
}

impl Session {
    /// The id the account's lease names this session's holder by.
    pub fn holder(&self) -> &str {
        self.lock.holder()
    }

    /// The account's fence: what the session's journal writes and lease checks go by.
    pub fn fence(&self) -> mailbroker_store::Fence {
        self.lock.fence()
    }

    /// Logs out, then frees the account; the protocol commands the session sent.
    pub async fn close(mut self) -> u64 {
        self.provider.close().await;
        self.lock.release().await;
        self.provider.commands_sent()
    }
}

/// Locks the account, then connects to it with its stored settings and secret.
pub async fn open(store: &Store, id: &AccountId) -> Result<Session> {
    open_known(store, id, None).await
}

/// As `open`, with the account's row when the caller has read it already.
async fn open_known(
    store: &Store,
    id: &AccountId,
    record: Option<&AccountRecord>,
) -> Result<Session> {
    let (lock, connector) = lock_and_read(store, id, record).await?;
    Ok(Session {
        lock,
        provider: connector.connect().await?,
    })
}

/// The account's lock, and what connecting to it needs from the index (its row, unless
/// the caller read it already, and its secret).
async fn lock_and_read(
    store: &Store,
    id: &AccountId,
    record: Option<&AccountRecord>,
) -> Result<(AccountLock, Box<dyn mailbroker_core::Connector>)> {
    // Nothing has reached a server yet: a write that cannot hold its account says so.
    let lock =
        (store.lock_account(id, LOCK_WAIT).await).map_err(|e| e.context("nothing was sent"))?;
    let connector = match record {
        Some(record) => registry::connector(store, record).await?,
        None => registry::connector(store, &store.account(id).await?).await?,
    };
    Ok((lock, connector))
}

/// The sessions of one write: those opened ahead, and the others opened when first needed.
/// Dropping it ends the sessions still opening and those no batch took.
pub struct Sessions {
    store: Store,
    ahead: BTreeMap<AccountId, JoinHandle<Result<Session>>>,
    /// Account rows the write read already, so opening a session reads none again.
    known: BTreeMap<AccountId, AccountRecord>,
}

impl Sessions {
    /// Sessions opened only when a batch needs them.
    pub fn new(store: &Store) -> Sessions {
        Sessions {
            store: store.clone(),
            ahead: BTreeMap::new(),
            known: BTreeMap::new(),
        }
    }

    /// The same sessions, opening with these account rows rather than reading them again.
    pub fn knowing(mut self, records: BTreeMap<AccountId, AccountRecord>) -> Sessions {
        self.known.extend(records);
        self
    }

    /// Starts opening a session per account of `places` (account, mailbox), selecting the
    /// mailbox where the account has only one. Each account is locked and what connecting
    /// needs is read from the index before this returns, so the caller's own reading of the
    /// index does not compete with it; the network work goes on while the caller works.
    pub async fn open_ahead(
        store: &Store,
        places: &[(AccountId, String)],
        known: &BTreeMap<AccountId, AccountRecord>,
    ) -> Result<Sessions> {
        let accounts: std::collections::BTreeSet<&AccountId> =
            places.iter().map(|(account, _)| account).collect();
        let mut ahead = BTreeMap::new();
        for account in accounts {
            let (lock, connector) = lock_and_read(store, account, known.get(account)).await?;
            let id = account.to_string();
            let task = tokio::spawn(async move {
                let provider = connector.connect().await?;
                tracing::debug!(account = id, "write: session opened ahead");
                Ok(Session { lock, provider })
            });
            ahead.insert(account.clone(), task);
        }
        Ok(Sessions {
            store: store.clone(),
            ahead,
            known: known.clone(),
        })
    }

    /// The account's session: the one opened ahead, else a new one.
    pub async fn take(&mut self, account: &AccountId) -> Result<Session> {
        match self.ahead.remove(account) {
            Some(task) => task
                .await
                .map_err(|e| Error::internal(format!("opening account {account}: {e}")))?,
            None => open_known(&self.store, account, self.known.get(account)).await,
        }
    }

    /// Ends the sessions opened ahead that no batch took, politely where they are open;
    /// returns the commands they sent.
    pub async fn close_unused(&mut self) -> u64 {
        let mut commands = 0;
        for (_, task) in std::mem::take(&mut self.ahead) {
            if !task.is_finished() {
                task.abort();
                continue;
            }
            if let Ok(Ok(session)) = task.await {
                commands += session.close().await;
            }
        }
        commands
    }
}

impl Drop for Sessions {
    fn drop(&mut self) {
        for task in self.ahead.values() {
            task.abort();
        }
    }
}
