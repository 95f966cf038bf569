//! The home directory: where the index, lock files and (later) tokens live.
//!
//! Resolution order: `--home DIR`, then `$MAILBROKER_HOME`, then `$XDG_DATA_HOME/mailbroker`,
//! then `~/.local/share/mailbroker`. The directory is 0700 and the files in it 0600, because the
//! database holds account secrets.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mailbroker_core::{AccountId, Error};

use crate::util::io_error;

/// How long a command waits for an account another sync or write holds.
pub const LOCK_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
pub struct Home {
    dir: PathBuf,
}

impl Home {
    /// Finds (and creates, 0700) the home directory.
    pub fn resolve(flag: Option<&Path>) -> Result<Home, Error> {
        let dir = match flag {
            Some(p) => p.to_path_buf(),
            None => match std::env::var_os("MAILBROKER_HOME").filter(|v| !v.is_empty()) {
                Some(p) => PathBuf::from(p),
                None => match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
                    Some(p) => PathBuf::from(p).join("mailbroker"),
                    None => {
                        let home = std::env::var_os("HOME").ok_or_else(|| {
                            Error::validation("cannot find a home directory")
                                .with_next_step("pass --home DIR or set MAILBROKER_HOME")
                        })?;
                        PathBuf::from(home).join(".local/share/mailbroker")
                    }
                },
            },
        };
        fs::create_dir_all(dir.join("locks"))
            .map_err(|e| io_error(&format!("cannot create home {}", dir.display()), &e))?;
        restrict_dir(&dir)?;
        Ok(Home { dir })
    }

    /// The home directory itself (0700).
    pub fn root(&self) -> &Path {
        &self.dir
    }

    pub fn database(&self) -> PathBuf {
        self.dir.join("index.sqlite3")
    }

    /// Takes the account's lock, waiting up to `wait`. Sync and writes on one account hold it,
    /// so they never interleave, whether in one process or several (OS file locks).
    ///
    /// Waiting is in line: a waiter first takes the account's queue lock, then waits for the
    /// account lock itself, and gives the queue up once it has it. A sync that finds the
    /// queue taken at one of its checkpoints steps aside (`AccountLock::step_aside`), so a
    /// write waits only for the batch in flight, never for a whole sync.
    pub async fn lock_account(&self, id: &AccountId, wait: Duration) -> Result<AccountLock, Error> {
        let locks = self.dir.join("locks");
        let lock = AccountLock {
            id: id.clone(),
            held: open_lock(&locks.join(format!("{id}.lock")))?,
            queue: open_lock(&locks.join(format!("{id}.queue")))?,
        };
        lock.wait_in_line(Instant::now() + wait).await?;
        Ok(lock)
    }
}

fn open_lock(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_error(&format!("cannot open lock {}", path.display()), &e))
}

/// Held while an account is being synced or written; released on drop.
#[derive(Debug)]
pub struct AccountLock {
    id: AccountId,
    /// Locked while this holds the account.
    held: File,
    /// Locked by whoever waits for the account next.
    queue: File,
}

impl AccountLock {
    /// Whether someone is waiting for the account.
    pub fn awaited(&self) -> bool {
        match self.queue.try_lock() {
            Ok(()) => {
                let _ = self.queue.unlock();
                false
            }
            Err(_) => true,
        }
    }

    /// Lets whoever waits for the account have it, then takes it back in turn. The holder
    /// must have nothing half done: what it wrote is committed, and what it read from the
    /// server is applied, because someone else changes the account meanwhile.
    pub async fn step_aside(&mut self) -> Result<(), Error> {
        self.held
            .unlock()
            .map_err(|e| Error::internal(format!("cannot unlock account {}: {e}", self.id)))?;
        self.wait_in_line(Instant::now() + LOCK_WAIT).await
    }

    /// Takes the queue, then the account, then frees the queue for the next waiter.
    async fn wait_in_line(&self, deadline: Instant) -> Result<(), Error> {
        self.take(&self.queue, deadline).await?;
        let held = self.take(&self.held, deadline).await;
        let _ = self.queue.unlock();
        held
    }

    async fn take(&self, file: &File, deadline: Instant) -> Result<(), Error> {
        let id = &self.id;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(()),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(Error::provider_unavailable(format!(
                        "account {id} is busy with another sync or write"
                    ))
                    .with_next_step("retry when it has finished"));
                }
                Err(fs::TryLockError::Error(e)) => {
                    return Err(Error::internal(format!("cannot lock account {id}: {e}")));
                }
            }
        }
    }
}

/// Makes the home 0700. A home already that private needs no change, so a read-only one
/// (a mounted backup, read by `search`) still opens; the index then says what it cannot do.
fn restrict_dir(dir: &Path) -> Result<(), Error> {
    let private = fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o700);
    if private {
        return Ok(());
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| io_error(&format!("cannot restrict home {}", dir.display()), &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lock_excludes_a_second_holder_until_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        let id: AccountId = "work".parse().unwrap();
        let first = home.lock_account(&id, Duration::ZERO).await.unwrap();
        let busy = home
            .lock_account(&id, Duration::from_millis(120))
            .await
            .unwrap_err();
        assert_eq!(busy.error_type(), "provider_unavailable");
        drop(first);
        home.lock_account(&id, Duration::ZERO).await.unwrap();
        let mode = fs::metadata(tmp.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[tokio::test]
    async fn a_holder_stepping_aside_lets_the_waiter_in_then_takes_the_account_back() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(tmp.path())).unwrap();
        let id: AccountId = "work".parse().unwrap();
        let mut first = home.lock_account(&id, Duration::ZERO).await.unwrap();
        assert!(!first.awaited(), "nobody waits yet");
        let waiting = {
            let (home, id) = (home.clone(), id.clone());
            tokio::spawn(async move { home.lock_account(&id, Duration::from_secs(10)).await })
        };
        while !first.awaited() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stepping = tokio::spawn(async move { first.step_aside().await.map(|()| first) });
        let second = waiting.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !stepping.is_finished(),
            "the account is back only after the waiter"
        );
        drop(second);
        let first = stepping.await.unwrap().unwrap();
        assert!(!first.awaited());
        home.lock_account(&id, Duration::from_millis(120))
            .await
            .unwrap_err();
    }
}
