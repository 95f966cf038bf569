//! Starting and stopping a private Dovecot (facts in the project's Dovecot notes: guard the
//! system service, `first_valid_uid = 1` as root, no auth penalty, loopback only).

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::certs::TestCa;

/// Every user of a test Dovecot has this password (a static passdb: any user name works).
pub const PASSWORD: &str = "test-password-1";

pub struct Dovecot {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Plain port; STARTTLS is offered on it.
    pub imap_port: u16,
    /// Implicit-TLS port.
    pub imaps_port: u16,
    /// ManageSieve (Pigeonhole; STARTTLS offered), where Pigeonhole is installed.
    pub sieve_port: Option<u16>,
    pub ca: TestCa,
}

/// A loopback port free now and never handed out before in this process: the kernel may give
/// the same one to two binds in a row once the first listener is dropped.
pub(crate) fn free_port() -> Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
}

fn find_binary(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// uid/gid of a system user, from /etc/passwd.
fn system_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.first() == Some(&name))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

fn current_user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.get(2).and_then(|u| u.parse::<u32>().ok()) == Some(uid)).then(|| f[0].to_string())
    })
}

/// Whether Pigeonhole's ManageSieve and Sieve plugin are installed (`dovecot-managesieved`,
/// `dovecot-sieve`).
pub fn sieve_installed() -> bool {
    std::path::Path::new("/usr/lib/dovecot/managesieve-login").exists()
}

/// ManageSieve on `port`, and Sieve run on delivery by the LDA (`deliver`): each user's
/// scripts in `~/sieve`, the active one linked from `~/.dovecot.sieve`.
fn sieve_config(port: u16) -> String {
    format!(
        r#"
service managesieve-login {{
  inet_listener sieve {{
    address = 127.0.0.1
    port = {port}
  }}
}}
protocol lda {{
  mail_plugins = $mail_plugins sieve
}}
plugin {{
  sieve = file:~/sieve;active=~/.dovecot.sieve
}}
"#
    )
}

impl Dovecot {
    /// Whether a Dovecot binary is installed.
    pub fn available() -> bool {
        find_binary("dovecot").is_some()
    }

    /// Starts a private Dovecot and waits until it accepts connections.
    /// Between choosing a free port and Dovecot binding it, another process's outgoing
    /// connection may take it; a failed start is tried again on new ports, twice.
    pub fn start() -> Result<Dovecot> {
        let mut attempt = 1;
        loop {
            match Dovecot::start_once() {
                Ok(server) => return Ok(server),
                Err(e) if attempt < 3 => {
                    eprintln!("dovecot start {attempt} failed, trying new ports: {e:#}");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn start_once() -> Result<Dovecot> {
        let binary = find_binary("dovecot")
            .ok_or_else(|| anyhow!("dovecot is not installed (apt-get install dovecot-imapd)"))?;
        let dir = tempfile::Builder::new()
            .prefix("mailbroker-dovecot-")
            .tempdir()?;
        // Dovecot's unprivileged processes must reach the config, certs and homes.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let ca = TestCa::generate(dir.path())?;
        let root = unsafe { libc::geteuid() } == 0;
        let (internal_user, login_user, mail_uid, mail_gid) = if root {
            let (uid, gid) = system_user("dovecot")
                .ok_or_else(|| anyhow!("the dovecot system user is missing"))?;
            let login = if system_user("dovenull").is_some() {
                "dovenull"
            } else {
                "dovecot"
            };
            ("dovecot".to_string(), login.to_string(), uid, gid)
        } else {
            let uid = unsafe { libc::getuid() };
            let gid = unsafe { libc::getgid() };
            let name = current_user_name(uid).ok_or_else(|| anyhow!("cannot name uid {uid}"))?;
            (name.clone(), name, uid, gid)
        };
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home)?;
        chown(&home, mail_uid, mail_gid)?;
        let imap_port = free_port()?;
        let imaps_port = free_port()?;
        let sieve_port = sieve_installed().then(free_port).transpose()?;
        let d = dir.path().display();
        let config = format!(
            r#"
base_dir = {d}/run
state_dir = {d}/state
instance_name = mailbroker-test-{imap_port}
log_path = {d}/dovecot.log
protocols = {protocols}
listen = 127.0.0.1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
login_trusted_networks = 127.0.0.0/8
shutdown_clients = yes
first_valid_uid = 1
default_internal_user = {internal_user}
default_login_user = {login_user}
mail_location = sdbox:~/mail
# Throw-away data: no fsync, or seeding 100k messages waits on the disk.
mail_fsync = never
mail_home = {d}/home/%u
passdb {{
  driver = static
  args = password={PASSWORD}
}}
userdb {{
  driver = static
  args = uid={mail_uid} gid={mail_gid} home={d}/home/%u
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \Sent
    auto = subscribe
  }}
  mailbox Junk {{
    special_use = \Junk
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \Trash
    auto = subscribe
  }}
  mailbox Archive {{
    special_use = \Archive
    auto = subscribe
  }}
}}
protocol imap {{
  mail_max_userip_connections = 1000
}}
# A team of a thousand accounts on two nodes keeps a thousand sessions and their syncs open;
# over TLS each keeps its login process too, as the proxy of its encryption.
service imap {{
  process_limit = 4096
}}
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  process_limit = 4096
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
{sieve}"#,
            cert = ca.cert_pem.display(),
            key = ca.key_pem.display(),
            protocols = if sieve_port.is_some() {
                "imap sieve"
            } else {
                "imap"
            },
            sieve = sieve_port.map_or(String::new(), sieve_config),
        );
        let conf = dir.path().join("dovecot.conf");
        std::fs::write(&conf, config)?;
        let child = spawn_tied_to_process(&binary, &conf)?;
        let mut server = Dovecot {
            dir,
            child: Some(child),
            imap_port,
            imaps_port,
            sieve_port,
            ca,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Stops this server and starts it again on the same ports with the same mail, as an
    /// administrator's restart does: every client connection is cut meanwhile.
    pub fn restart(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            child.wait()?;
        }
        // Session processes outlive their master for a while; a restart ends them now.
        let mine = format!("dovecot-mailbroker-test-{}/", self.imap_port);
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let pid = entry.file_name().to_string_lossy().parse::<libc::pid_t>();
            if let (true, Ok(pid)) = (cmdline.starts_with(mine.as_bytes()), pid) {
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        let binary = find_binary("dovecot").ok_or_else(|| anyhow!("dovecot is not installed"))?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            self.child = Some(spawn_tied_to_process(&binary, &self.config_path())?);
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                // The old master may still hold the ports for a moment.
                Err(_) if Instant::now() < deadline => {
                    if let Some(mut child) = self.child.take() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("dovecot exited at start ({status}): {}", self.log());
            }
            let both = [self.imap_port, self.imaps_port]
                .iter()
                .chain(self.sieve_port.as_ref())
                .all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok());
            if both {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "dovecot did not start listening within 15 s: {}",
            self.log()
        )
    }

    /// Delivers `message` to `user` as a mail server would, by Dovecot's LDA: the user's
    /// active Sieve script runs on it. The LDA's own words when it fails.
    pub fn deliver(&self, user: &str, message: &[u8]) -> Result<()> {
        use std::io::Write;
        let conf = self.dir.path().join("dovecot.conf");
        let mut lda = std::process::Command::new("/usr/lib/dovecot/dovecot-lda")
            .arg("-c")
            .arg(&conf)
            .args(["-d", user])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        lda.stdin
            .take()
            .ok_or_else(|| anyhow!("no stdin"))?
            .write_all(message)?;
        let out = lda.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "dovecot-lda: {}{}",
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
        }
        Ok(())
    }

    /// Dovecot's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("dovecot.conf")
    }

    /// Adds messages to `user`'s INBOX fast: MULTIAPPEND with non-synchronising literals
    /// (LITERAL+), a thousand messages per command. One APPEND per message would take minutes
    /// for 100k messages; `doveadm import` from a Maildir is slower still.
    pub fn import_messages(
        &self,
        user: &str,
        messages: impl Iterator<Item = Vec<u8>>,
    ) -> Result<u64> {
        self.import_flagged(user, messages.map(|m| (String::new(), m)))
    }

    /// As `import_messages`, each message with its flags (`\Seen $Work`, or empty).
    pub fn import_flagged(
        &self,
        user: &str,
        messages: impl Iterator<Item = (String, Vec<u8>)>,
    ) -> Result<u64> {
        use std::io::{BufRead, BufReader, Write};
        let stream = std::net::TcpStream::connect(("127.0.0.1", self.imap_port))?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, stream);
        let mut line = String::new();
        let mut expect_ok =
            |reader: &mut BufReader<std::net::TcpStream>, tag: &str| -> Result<()> {
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 {
                        bail!("imap server closed the connection while seeding");
                    }
                    if let Some(rest) = line.strip_prefix(tag) {
                        if rest.starts_with(" OK") {
                            return Ok(());
                        }
                        bail!("seeding failed: {line}");
                    }
                }
            };
        expect_ok(&mut reader, "*")?;
        write!(writer, "s0 LOGIN \"{user}\" \"{PASSWORD}\"\r\n")?;
        writer.flush()?;
        expect_ok(&mut reader, "s0")?;
        let mut n = 0u64;
        let mut batch = 0;
        let mut pending = false;
        for (flags, body) in messages {
            if !pending {
                batch += 1;
                write!(writer, "s{batch} APPEND INBOX")?;
                pending = true;
            }
            if !flags.is_empty() {
                write!(writer, " ({flags})")?;
            }
            write!(writer, " {{{}+}}\r\n", body.len())?;
            writer.write_all(&body)?;
            n += 1;
            if n.is_multiple_of(1000) {
                writer.write_all(b"\r\n")?;
                writer.flush()?;
                expect_ok(&mut reader, &format!("s{batch}"))?;
                pending = false;
            }
        }
        if pending {
            writer.write_all(b"\r\n")?;
            writer.flush()?;
            expect_ok(&mut reader, &format!("s{batch}"))?;
        }
        writer.write_all(b"s9999999 LOGOUT\r\n")?;
        writer.flush()?;
        Ok(n)
    }

    /// Runs `doveadm -c <our config> ARGS…`.
    pub fn doveadm(&self, args: &[&str]) -> Result<String> {
        let doveadm = find_binary("doveadm").ok_or_else(|| anyhow!("doveadm is not installed"))?;
        let out = Command::new(doveadm)
            .arg("-c")
            .arg(self.config_path())
            .args(args)
            .output()
            .context("running doveadm")?;
        if !out.status.success() {
            bail!(
                "doveadm {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Servers kept in a `static` for a whole test binary are never dropped; these are stopped and
/// their directories removed when the process exits.
static AT_EXIT: std::sync::Mutex<Vec<(u32, PathBuf)>> = std::sync::Mutex::new(Vec::new());

extern "C" fn stop_shared_servers() {
    if let Ok(mut servers) = AT_EXIT.lock() {
        for (pid, dir) in servers.drain(..) {
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Dovecot {
    /// Stops this server and removes its files when the process exits, for a server that lives
    /// in a `static` (whose `Drop` never runs).
    pub fn stop_at_exit(&self) {
        if let Some(child) = self.child.as_ref() {
            stop_at_exit(child.id(), self.dir.path());
        }
    }
}

/// Stops server `pid` and removes `dir` when the process exits, for a server that lives in a
/// `static` (whose `Drop` never runs).
pub(crate) fn stop_at_exit(pid: u32, dir: &Path) {
    if let Ok(mut servers) = AT_EXIT.lock() {
        if servers.is_empty() {
            unsafe {
                libc::atexit(stop_shared_servers);
            }
        }
        servers.push((pid, dir.to_path_buf()));
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }
}

pub(crate) fn chown(path: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .with_context(|| format!("chown {}", path.display()))
}

/// Spawns `dovecot -F` tied to this process (`spawn_tied`).
fn spawn_tied_to_process(binary: &Path, conf: &Path) -> Result<Child> {
    let mut cmd = Command::new(binary);
    cmd.arg("-F").arg("-c").arg(conf).stderr(Stdio::null());
    spawn_tied(cmd)
}

/// Spawns `cmd` from a thread that lives as long as the process, with a parent-death
/// signal: when the test process exits (even on a crash) the server gets SIGTERM. The signal
/// is tied to the spawning thread, hence the parked thread.
pub(crate) fn spawn_tied(mut cmd: Command) -> Result<Child> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let _ = tx.send(cmd.spawn());
        loop {
            std::thread::park();
        }
    });
    Ok(rx.recv()??)
}
