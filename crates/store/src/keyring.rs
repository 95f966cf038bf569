//! Where account secrets rest: the OS keyring (macOS Keychain, a Secret Service such as
//! GNOME Keyring or KWallet) where one is available, else the index itself (a 0600 file);
//! sealed in the index with a key held outside it when `MAILBROKER_SECRET_KEY_FILE` names one
//! (`sealed.rs`). `MAILBROKER_SECRET_STORE=keyring` insists on the keyring, `=index` never
//! uses it, `=sealed` insists on a key.
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
    /// In the index, sealed with the key of `MAILBROKER_SECRET_KEY_FILE`.
    Sealed,
}

impl SecretStore {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretStore::Keyring => "keyring",
            SecretStore::Index => "index",
            SecretStore::Sealed => "sealed",
        }
    }

    pub fn parse(s: &str) -> SecretStore {
        match s {
            "keyring" => SecretStore::Keyring,
            "sealed" => SecretStore::Sealed,
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
        Some("sealed") => Ok(Some(SecretStore::Sealed)),
        Some(other) => Err(Error::validation(format!(
            "{STORE_ENV}={other:?} is not one of keyring, index, sealed, auto"
        ))),
    }
}

/// Why a keyring call failed: there is no keyring here at all (no Secret Service on the
/// session bus, or no bus), or there is one and it failed (locked, refused, no answer).
enum Failure {
    Absent(Error),
    Failed(Error),
}

impl Failure {
    fn error(self) -> Error {
        match self {
            Failure::Absent(e) | Failure::Failed(e) => e,
        }
    }
}

/// The secret-service crate's words for "no provider and no bus", and the bus's own for "no
/// such service": the only failures that mean there is no keyring here, not a broken one.
const ABSENT: [&str; 2] = [
    "no secret service provider or dbus session found",
    "org.freedesktop.DBus.Error.ServiceUnknown",
];

/// Runs a keyring call off the async threads (the crate blocks), within `WAIT`. The call
/// runs on a thread of its own rather than the runtime's blocking pool: a keyring that never
/// answers would otherwise hold the process at exit, which waits for that pool.
async fn call<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> keyring::Result<T> + Send + 'static,
) -> std::result::Result<T, Failure> {
    let unavailable = |detail: String| {
        Error::provider_unavailable(format!("the OS keyring cannot {what}: {detail}"))
            .with_next_step(format!(
                "unlock your keyring, or set {STORE_ENV}=index to keep secrets in the index"
            ))
    };
    let (answer, answered) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("keyring".into())
        .spawn(move || {
            let _ = answer.send(f());
        });
    if let Err(e) = spawned {
        return Err(Failure::Failed(Error::internal(format!(
            "keyring call: {e}"
        ))));
    }
    match tokio::time::timeout(WAIT, answered).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(e))) => {
            let detail = e.to_string();
            let absent = ABSENT.iter().any(|words| detail.contains(words));
            let error = unavailable(detail);
            Err(match absent {
                true => Failure::Absent(error),
                false => Failure::Failed(error),
            })
        }
        Ok(Err(e)) => Err(Failure::Failed(Error::internal(format!(
            "keyring call: {e}"
        )))),
        Err(_) => Err(Failure::Failed(unavailable("no answer".to_string()))),
    }
}

fn entry(name: &str) -> keyring::Result<keyring::Entry> {
    keyring::Entry::new(SERVICE, name)
}

/// Puts a new secret where it should rest. Returns the store and what the index keeps:
/// the secret itself, sealed, or the name of its keyring entry. `label` (the account and
/// kind) is what a sealed secret is bound to.
///
/// In a `shared` index (PostgreSQL) a secret is sealed or not stored at all: neither the
/// clear text nor one machine's keyring will do there.
///
/// Given a key (`MAILBROKER_SECRET_KEY_FILE`), the secret is sealed in the index unless the
/// keyring is insisted on. Left to choose (`auto`), the index holds it only where there is
/// no keyring at all; a keyring that is there but fails (locked, hung) is refused, so a
/// secret never lands in the index behind the person's back while they believe it is in
/// their keyring.
pub async fn put(secret: &str, label: &str, shared: bool) -> Result<(SecretStore, String)> {
    let choice = chosen()?;
    if shared {
        return match crate::sealed::key()? {
            Some(key) => Ok((
                SecretStore::Sealed,
                crate::sealed::seal(&key, label, secret)?,
            )),
            None => Err(crate::sealed::shared_needs_key()),
        };
    }
    if choice != Some(SecretStore::Keyring) {
        if let Some(key) = crate::sealed::key()? {
            return Ok((
                SecretStore::Sealed,
                crate::sealed::seal(&key, label, secret)?,
            ));
        }
        if choice == Some(SecretStore::Sealed) {
            return Err(
                Error::validation(format!("{STORE_ENV}=sealed, and no key file is given"))
                    .with_next_step(format!(
                        "set {} to a file holding 64 hex digits (openssl rand -hex 32)",
                        crate::sealed::KEY_ENV
                    )),
            );
        }
    }
    if choice == Some(SecretStore::Index) {
        return Ok((SecretStore::Index, secret.to_string()));
    }
    let name = crate::util::random_hex(16)?;
    let (key, value) = (name.clone(), secret.to_string());
    match call("store a secret", move || entry(&key)?.set_password(&value)).await {
        Ok(()) => Ok((SecretStore::Keyring, name)),
        Err(Failure::Absent(e)) if choice.is_none() => {
            tracing::debug!(error = %e, "no OS keyring; the secret stays in the index");
            Ok((SecretStore::Index, secret.to_string()))
        }
        Err(e) => Err(e.error()),
    }
}

/// The secret behind keyring entry `name`.
pub async fn get(name: &str) -> Result<String> {
    let key = name.to_string();
    call("read a secret", move || entry(&key)?.get_password())
        .await
        .map_err(|e| e.error().context("reading the account's secret"))
}

/// Replaces the secret behind keyring entry `name`.
pub async fn replace(name: &str, secret: &str) -> Result<()> {
    let (key, value) = (name.to_string(), secret.to_string());
    call("store a secret", move || entry(&key)?.set_password(&value))
        .await
        .map_err(Failure::error)
}

/// Removes keyring entry `name`; one already gone is fine.
pub async fn delete(name: &str) -> Result<()> {
    let key = name.to_string();
    match call("remove a secret", move || entry(&key)?.delete_credential()).await {
        Ok(()) => Ok(()),
        Err(e) => match e.error() {
            e if e.message().contains("No matching entry") => Ok(()),
            e => Err(e),
        },
    }
}
