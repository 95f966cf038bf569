//! Small utilities with no part in mail: random tokens, private files, whether a process
//! runs, and file-system failures in our vocabulary. A leaf: it imports nothing of this
//! crate, so any layer may use it.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use mailbroker_core::Error;

/// `bytes` random bytes as lowercase hex, from the OS.
pub fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| Error::internal(format!("no randomness: {e}")))?;
    Ok(hex::encode(buf))
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

/// This machine, as the index names the host of a process that holds something in it (a
/// `serve` node, an account's lease): such a process of this host that is gone holds nothing,
/// at once, without waiting for its time to run out.
pub fn host() -> String {
    fs::read_to_string("/etc/machine-id")
        .map(|id| id.trim().to_string())
        .ok()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| {
            let mut name = [0u8; 256];
            // SAFETY: the buffer is writable for its length, which is passed.
            let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
            let end = name.iter().position(|b| *b == 0).unwrap_or(0);
            match ok {
                true => String::from_utf8_lossy(&name[..end]).into_owned(),
                false => String::new(),
            }
        })
}

/// Makes a file readable and writable by its owner only.
pub fn restrict_file(path: &Path) -> Result<(), Error> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|e| io_error(&format!("cannot restrict {}", path.display()), &e))
}

/// The largest file a person hands mailbroker to read (a client file, a key, a token): a
/// few kilobytes each, so anything larger is a mistake, not something to read whole.
pub const SMALL_FILE: u64 = 1 << 20;

/// The text of a small file a person names (`what`: "client file"), read only if it is no
/// larger than `SMALL_FILE`; a UTF-8 byte order mark, which editors on some systems write, is
/// set aside.
pub fn read_small(path: &Path, what: &str) -> Result<String, Error> {
    let cannot = |e: std::io::Error| {
        Error::validation(format!("cannot read {what} {}: {e}", path.display()))
    };
    let file = fs::File::open(path).map_err(cannot)?;
    let size = file.metadata().map_err(cannot)?.len();
    if size > SMALL_FILE {
        return Err(Error::validation(format!(
            "{what} {} is {size} bytes; one is a few kilobytes",
            path.display()
        ))
        .with_next_step(format!("check the path: give the {what} itself")));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, SMALL_FILE), &mut text)
        .map_err(cannot)?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// The text of a file that holds a secret (`what`: "token file", "secret key file"), refused
/// when others than its owner may read or write it (`check_private`).
pub fn read_private(path: &Path, what: &str) -> Result<String, Error> {
    check_private(path, what)?;
    read_small(path, what)
}

/// Refuses a file that holds a secret when others than its owner may read or write it: the
/// secret is then no longer one.
pub fn check_private(path: &Path, what: &str) -> Result<(), Error> {
    let mode = fs::metadata(path)
        .map_err(|e| Error::validation(format!("cannot read {what} {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(Error::validation(format!(
            "{what} {} can be read by others (mode {:o})",
            path.display(),
            mode & 0o777
        ))
        .with_next_step(format!("run: chmod 600 {}", path.display())));
    }
    Ok(())
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
}
