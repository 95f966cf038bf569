//! The home directory: where the index, the home token and the processes' files live.
//!
//! Resolution order: `--home DIR`, then `$MAILBROKER_HOME`, then `$XDG_DATA_HOME/mailbroker`,
//! then `~/.local/share/mailbroker`. The directory is 0700 and the files in it 0600, because the
//! database holds account secrets.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use mailbroker_core::Error;

use crate::util::io_error;

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
        fs::create_dir_all(&dir)
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
