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
            .map_err(|e| Error::internal(format!("cannot create home {}: {e}", dir.display())))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::internal(format!("cannot restrict home {}: {e}", dir.display())))?;
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
    /// so they never interleave, whether in one process or several (an OS file lock).
    pub async fn lock_account(&self, id: &AccountId, wait: Duration) -> Result<AccountLock, Error> {
        let path = self.dir.join("locks").join(format!("{id}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::internal(format!("cannot open lock {}: {e}", path.display())))?;
        let start = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(AccountLock { _file: file }),
                Err(fs::TryLockError::WouldBlock) if start.elapsed() < wait => {
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

/// Held while an account is being synced or written; released on drop.
#[derive(Debug)]
pub struct AccountLock {
    _file: File,
}

/// Makes a file readable and writable by its owner only.
pub fn restrict_file(path: &Path) -> Result<(), Error> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::internal(format!("cannot restrict {}: {e}", path.display())))
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
}
