//! Where account secrets rest: the OS keyring (macOS Keychain, a Secret Service such as
//! GNOME Keyring or KWallet) where one is available, else the index itself (a 0600 file).
//! `MAILBROKER_SECRET_STORE=keyring` insists on the keyring, `=index` never uses it.
//!
//! A secret in the keyring is an entry of service `mailbroker` under a random name that the
//! index keeps instead of the secret (`credentials.store = 'keyring'`), so two homes never
//! share an entry.

use std::time::Duration;

use mailbroker_core::{Error, Result};

/// Which store holds an account's secret, as `account show` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretStore {
    Keyring,
    Index,
}

impl SecretStore {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretStore::Keyring => "keyring",
            SecretStore::Index => "index",
        }
    }

    pub fn parse(s: &str) -> SecretStore {
        match s {
            "keyring" => SecretStore::Keyring,
            _ => SecretStore::Index,
        }
    }
}

const SERVICE: &str = "mailbroker";
pub const STORE_ENV: &str = "MAILBROKER_SECRET_STORE";
/// A keyring that does not answer within this long is taken as none.
const WAIT: Duration = Duration::from_secs(5);

/// What the person asked for in `MAILBROKER_SECRET_STORE`: Some(store) to insist on one.
fn chosen() -> Result<Option<SecretStore>> {
    match std::env::var(STORE_ENV).ok().as_deref() {
        None | Some("" | "auto") => Ok(None),
        Some("keyring") => Ok(Some(SecretStore::Keyring)),
        Some("index") => Ok(Some(SecretStore::Index)),
        Some(other) => Err(Error::validation(format!(
            "{STORE_ENV}={other:?} is not one of keyring, index, auto"
        ))),
    }
}

/// Runs a keyring call off the async threads (the crate blocks), within `WAIT`.
async fn call<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> keyring::Result<T> + Send + 'static,
) -> Result<T> {
    let unavailable = |detail: String| {
        Error::provider_unavailable(format!("the OS keyring cannot {what}: {detail}"))
            .with_next_step(format!(
                "unlock your keyring, or set {STORE_ENV}=index to keep secrets in the index"
            ))
    };
    match tokio::time::timeout(WAIT, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(e))) => Err(unavailable(e.to_string())),
        Ok(Err(e)) => Err(Error::internal(format!("keyring call: {e}"))),
        Err(_) => Err(unavailable("no answer".to_string())),
    }
}

fn entry(name: &str) -> keyring::Result<keyring::Entry> {
    keyring::Entry::new(SERVICE, name)
}

/// Puts a new secret where it should rest. Returns the store and what the index keeps:
/// the secret itself, or the name of its keyring entry.
pub async fn put(secret: &str) -> Result<(SecretStore, String)> {
    let choice = chosen()?;
    if choice == Some(SecretStore::Index) {
        return Ok((SecretStore::Index, secret.to_string()));
    }
    let name = crate::mcp::random_hex(16)?;
    let (key, value) = (name.clone(), secret.to_string());
    match call("store a secret", move || entry(&key)?.set_password(&value)).await {
        Ok(()) => Ok((SecretStore::Keyring, name)),
        Err(e) if choice.is_none() => {
            tracing::debug!(error = %e, "no OS keyring; the secret stays in the index");
            Ok((SecretStore::Index, secret.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// The secret behind keyring entry `name`.
pub async fn get(name: &str) -> Result<String> {
    let key = name.to_string();
    call("read a secret", move || entry(&key)?.get_password())
        .await
        .map_err(|e| e.context("reading the account's secret"))
}

/// Replaces the secret behind keyring entry `name`.
pub async fn replace(name: &str, secret: &str) -> Result<()> {
    let (key, value) = (name.to_string(), secret.to_string());
    call("store a secret", move || entry(&key)?.set_password(&value)).await
}

/// Removes keyring entry `name`; one already gone is fine.
pub async fn delete(name: &str) -> Result<()> {
    let key = name.to_string();
    match call("remove a secret", move || entry(&key)?.delete_credential()).await {
        Err(e) if e.message().contains("No matching entry") => Ok(()),
        other => other,
    }
}
