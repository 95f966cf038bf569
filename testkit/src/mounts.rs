//! Filesystems that fail the way a person's disk can, for the tests of what mailbroker does
//! when its index cannot be written: a file made read-only by a read-only bind mount (root
//! may write any file whatever its mode bits), and a small tmpfs that fills up.
//!
//! Both need `mount`, so root. Outside CI a test skips without them; under `CI=true` (which
//! runs as root) a failure to mount fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Whether this process may mount filesystems; `false` skips a test outside CI and fails it
/// in CI.
pub fn can_mount() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            !crate::dovecot_required(),
            "CI=true but the tests are not running as root: they need mount"
        );
        eprintln!("skipping: mounting a test filesystem needs root");
    }
    root
}

/// A mount made by a test, undone when dropped.
pub struct Mount {
    target: PathBuf,
}

fn run(args: &[&str], target: &Path) -> Result<()> {
    let status = Command::new("mount")
        .args(args)
        .arg(target)
        .status()
        .context("run mount")?;
    if !status.success() {
        bail!("mount {args:?} {} failed", target.display());
    }
    Ok(())
}

impl Mount {
    /// A tmpfs of `kib` KiB at `dir`, mode 0700.
    pub fn tmpfs(dir: &Path, kib: u64) -> Result<Mount> {
        let size = format!("size={kib}k,mode=0700");
        run(&["-t", "tmpfs", "-o", &size, "tmpfs"], dir)?;
        Ok(Mount {
            target: dir.to_path_buf(),
        })
    }

    /// `file` itself, read-only: a bind mount of it over itself, remounted read-only. Its
    /// directory stays writable, as for a person whose index file lost its write bit.
    pub fn read_only_file(file: &Path) -> Result<Mount> {
        let path = file.display().to_string();
        run(&["--bind", &path], file)?;
        let mount = Mount {
            target: file.to_path_buf(),
        };
        run(&["-o", "remount,bind,ro"], file)?;
        Ok(mount)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.target).status();
    }
}

/// Fills the filesystem holding `dir` with a file of its own until the disk is full, then
/// frees `keep_kib` KiB of it again. Returns the file, so the test can free the space later.
pub fn fill(dir: &Path, keep_kib: u64) -> Result<PathBuf> {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path)?;
    let block = vec![0u8; 4096];
    let mut written: u64 = 0;
    loop {
        match file.write(&block) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => return Err(e.into()),
        }
    }
    file.set_len(written.saturating_sub(keep_kib * 1024))?;
    file.sync_all()?;
    Ok(path)
}
