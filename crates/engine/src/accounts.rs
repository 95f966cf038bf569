//! Account services shared by the CLI and MCP: add (what a provider's `setup` made), list,
//! show, remove, and the adapter's login and doctor.

use crate::registry::AccountAdapter;
use mailbroker_core::{AccountId, Consent, DoctorReport, Error, NewAccount, Result};

use crate::registry::StoreSecrets;
use mailbroker_store::{AccountRecord, MailboxRecord, Store, now_secs};

/// Refuses an id already taken, before a provider's setup asks anything of the person.
pub async fn check_new(store: &Store, id: &AccountId) -> Result<()> {
    if store.account(id).await.is_ok() {
        return Err(Error::validation(format!("account {id} already exists"))
            .with_next_step(format!("run: mailbroker account remove {id}")));
    }
    Ok(())
}

/// Stores an account a provider's `setup` made: its row, secret and mailboxes, or nothing.
pub async fn add(store: &Store, id: AccountId, new: NewAccount) -> Result<AccountView> {
    check_new(store, &id).await?;
    let record = AccountRecord {
        id,
        provider: new.provider,
        email: new.email,
        settings: new.settings,
        capabilities: new.capabilities,
        created_at: now_secs(),
        last_sync_at: None,
        sync_cursor: new.cursor,
        fallback: None,
        unattended_deletions_since: None,
    };
    let secret = new.secret.as_ref().map(|(k, v)| (k.as_str(), v.as_str()));
    store.add_account(&record, secret, &new.mailboxes).await?;
    show(store, &record.id).await
}

/// Authorizes again (after a revoke; `upgrade` for what permanent deletion needs) and stores
/// the new secret and what it grants.
pub async fn login(
    store: &Store,
    id: &AccountId,
    upgrade: mailbroker_core::Upgrade,
    how: Consent,
) -> Result<AccountView> {
    let record = store.account(id).await?;
    let secrets = StoreSecrets {
        store: store.clone(),
        account: id.clone(),
    };
    let caps = record
        .adapter()?
        .login(&record.info(), &secrets, upgrade, how)
        .await?;
    store.set_capabilities(id, &caps).await?;
    show(store, id).await
}

/// Checks that the account works: its secret, what it grants, that the server answers.
pub async fn doctor(store: &Store, id: &AccountId) -> Result<DoctorReport> {
    let record = store.account(id).await?;
    let secrets = StoreSecrets {
        store: store.clone(),
        account: id.clone(),
    };
    record.adapter()?.doctor(&record.info(), &secrets).await
}

/// An account as the CLI prints it: never its secrets.
#[derive(Debug)]
pub struct AccountView {
    pub account: AccountRecord,
    /// Where its secret rests: `keyring` (the OS keyring) or `index` (the 0600 index).
    pub secret_store: Option<&'static str>,
    pub mailboxes: Vec<MailboxRecord>,
}

pub async fn show(store: &Store, id: &AccountId) -> Result<AccountView> {
    let account = store.account(id).await?;
    let mailboxes = store.mailboxes(id).await?;
    let secret_store = store.secret_store(id).await?.map(|s| s.as_str());
    Ok(AccountView {
        account,
        secret_store,
        mailboxes,
    })
}

/// Sets the route used when the account's own is unavailable (`None` removes it). Only a
/// route that can stand in for another provider's account, and runs here, is accepted.
pub async fn set_fallback(
    store: &Store,
    id: &AccountId,
    fallback: Option<mailbroker_store::Fallback>,
) -> Result<AccountView> {
    let record = store.account(id).await?;
    if let Some(f) = &fallback {
        if f.provider == record.provider {
            return Err(Error::validation(format!(
                "account {id} is a {} account already; a fallback is another route",
                f.provider.as_str()
            )));
        }
        // Refused here, not when the server is down: a route that cannot run on this machine.
        crate::fallback::opener(f.provider)?(&f.settings)?;
    }
    store.set_fallback(id, fallback.as_ref()).await?;
    show(store, id).await
}

pub async fn list(store: &Store) -> Result<Vec<AccountRecord>> {
    store.accounts().await
}

/// Removes the account; the names of keyring entries (service `mailbroker`) that an
/// unreachable keyring kept are returned.
pub async fn remove(store: &Store, id: &AccountId) -> Result<Vec<String>> {
    store.remove_account(id).await
}
