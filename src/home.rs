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
        self.wait_in_line(Instant::now() + crate::sessions::LOCK_WAIT)
            .await
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

/// Whether the process a file in the home names (a listener, `serve`) still runs: one that
/// was killed leaves its file behind. Signal 0 asks the kernel without sending anything, on
/// Linux and macOS alike (macOS has no `/proc`); EPERM means it runs as someone else.
pub fn running(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing and has no memory preconditions.
    let answer = unsafe { libc::kill(pid, 0) };
    answer == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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

/// Makes a file readable and writable by its owner only.
pub fn restrict_file(path: &Path) -> Result<(), Error> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| io_error(&format!("cannot restrict {}", path.display()), &e))
}

/// Writes `path` whole and private: the bytes go to a new 0600 file beside it, which then
/// replaces `path`, so no reader ever sees it partly written or readable by others, and a
/// failure (a full disk) leaves what was there before.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let what = format!("cannot write {}", path.display());
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error(&what, &e));
    }
    Ok(())
}

/// A failure of the file system under the home in our vocabulary: one that keeps us from
/// writing (read-only, no permission) is `writes_disabled`, a full disk `limit_exceeded`,
/// each with what the person can do; anything else is ours.
pub fn io_error(what: &str, e: &std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EROFS | libc::EACCES | libc::EPERM) => {
            Error::writes_disabled(format!("{what}: {e}")).with_next_step(
                "make the home directory and its files writable by you (see --home), then retry",
            )
        }
        Some(libc::ENOSPC | libc::EDQUOT) => Error::limit_exceeded(format!("{what}: {e}"))
            .with_next_step("free space on that disk, then retry"),
        _ => Error::internal(format!("{what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_runs_until_it_is_gone() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!running(pid), "a reaped child");
        assert!(!running(0) && !running(u32::MAX));
    }

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
