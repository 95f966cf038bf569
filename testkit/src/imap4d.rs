//! A private GNU Mailutils `imap4d`: the worst-case IMAP server (no UIDPLUS, MOVE,
//! CONDSTORE, QRESYNC, ENABLE or SPECIAL-USE; no keywords), on a loopback port, with users in
//! a private virtual domain, so nothing on the machine is touched.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

/// The domain every user logs in under: `USER@example.org`.
pub const DOMAIN: &str = "example.org";

/// `crate::PASSWORD` as sha512-crypt, the form imap4d's passwd file takes.
const PASSWORD_HASH: &str = "$6$mailbroker$LbafhyMJcbacdAHHNO6JiEOjmAQunX6mujA7Su8sIsEqdf/gMMhofOMP.r.BS.rzmPH.91PgBNfzI3rAAmYIZ1";

pub struct Imap4d {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Plain IMAP only: this server is only ever reached on loopback.
    pub port: u16,
    /// Who owns the mail: nobody when run as root, else the caller.
    owner: (u32, u32),
    /// Held while the passwd file is rewritten: tests add users at once.
    users: std::sync::Mutex<()>,
}

impl Imap4d {
    /// Whether imap4d is installed.
    pub fn available() -> bool {
        binary().is_some()
    }

    /// Starts a private imap4d and waits until it accepts connections.
    pub fn start() -> Result<Imap4d> {
        let binary = binary()
            .ok_or_else(|| anyhow!("imap4d is not installed (apt-get install mailutils-imap4d)"))?;
        let dir = tempfile::Builder::new()
            .prefix("mailbroker-imap4d-")
            .tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let owner = match unsafe { libc::geteuid() } {
            0 => (65534, 65534),
            _ => unsafe { (libc::getuid(), libc::getgid()) },
        };
        let d = dir.path();
        for sub in ["passwd", "home"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        std::fs::write(d.join("passwd").join(DOMAIN), "")?;
        crate::dovecot::chown(&d.join("home"), owner.0, owner.1)?;
        let port = crate::dovecot::free_port()?;
        let config = format!(
            r#"
auth {{ authentication generic; authorization virtdomain; }}
virtdomain {{ passwd-dir "{d}/passwd"; }}
logging {{ syslog no; }}
server 127.0.0.1:{port} {{ transcript no; }}
"#,
            d = d.display()
        );
        std::fs::write(d.join("imap4d.conf"), config)?;
        let child = spawn(&binary, &d.join("imap4d.conf"), &d.join("imap4d.log"))?;
        let mut server = Imap4d {
            dir,
            child: Some(child),
            port,
            owner,
            users: std::sync::Mutex::new(()),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Stops this server and removes its files when the process exits, for a server that
    /// lives in a `static` (whose `Drop` never runs).
    pub fn stop_at_exit(&self) {
        if let Some(child) = self.child.as_ref() {
            crate::dovecot::stop_at_exit(child.id(), self.dir.path());
        }
    }

    /// Adds `user` (logging in as `user@example.org` with `crate::PASSWORD`) and returns the
    /// name to log in with.
    pub fn add_user(&self, user: &str) -> Result<String> {
        let d = self.dir.path();
        let home = d.join("home").join(user);
        std::fs::create_dir_all(&home)?;
        crate::dovecot::chown(&home, self.owner.0, self.owner.1)?;
        // Its mail is mbox files in its home (INBOX and one per folder). An APPEND to an
        // INBOX not there yet is refused with TRYCREATE, so it starts as an empty one.
        let inbox = home.join("INBOX");
        std::fs::write(&inbox, "")?;
        std::fs::set_permissions(&inbox, std::fs::Permissions::from_mode(0o600))?;
        crate::dovecot::chown(&inbox, self.owner.0, self.owner.1)?;
        let (uid, gid) = self.owner;
        let line = format!(
            "{user}:{PASSWORD_HASH}:{uid}:{gid}::{home}:/bin/false\n",
            home = home.display()
        );
        // One writer at a time (two tests adding users at once would each drop the other's
        // line), and the file replaced whole by a rename: imap4d reads it at every LOGIN, and
        // a file caught truncated mid-write refuses whoever logs in then.
        let _one_at_a_time = self.users.lock().unwrap_or_else(|e| e.into_inner());
        let file = d.join("passwd").join(DOMAIN);
        let mut all = std::fs::read_to_string(&file)?;
        all.push_str(&line);
        let next = d.join("passwd.next");
        std::fs::write(&next, all)?;
        std::fs::rename(&next, &file)?;
        Ok(format!("{user}@{DOMAIN}"))
    }

    /// imap4d's own output so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("imap4d.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("imap4d exited at start ({status}): {}", self.log());
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("imap4d did not listen within 15 s: {}", self.log())
    }
}

impl Drop for Imap4d {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }
}

fn binary() -> Option<PathBuf> {
    ["/usr/sbin/imap4d", "/usr/bin/imap4d"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Spawns imap4d in the foreground, tied to this process.
fn spawn(binary: &Path, conf: &Path, log: &Path) -> Result<Child> {
    let mut cmd = Command::new(binary);
    cmd.arg("--no-site-config")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--daemon", "--foreground"])
        .stderr(std::fs::File::create(log)?);
    crate::dovecot::spawn_tied(cmd)
}
