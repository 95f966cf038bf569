//! A private PostgreSQL cluster: `initdb` into a temporary directory, `postgres` on a free
//! loopback port, trust authentication for one user, so nothing on the machine is touched.
//! As root the server runs as the `postgres` user (it refuses to run as root). TLS is on,
//! with a certificate from a private CA of its own (`Postgres::ca`), as a team's database
//! would be: a client that asks for it (`sslmode=verify-full&sslrootcert=…`) gets it.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// The cluster's one user, owner of every database the tests create.
pub const USER: &str = "mailbroker";

pub struct Postgres {
    dir: tempfile::TempDir,
    child: Option<Child>,
    pub port: u16,
    /// The private CA the server's certificate (for `localhost` and `127.0.0.1`) is from.
    pub ca: crate::TestCa,
    bin: PathBuf,
    /// Who runs the server: `postgres` when we are root, else ourselves.
    owner: Option<(u32, u32)>,
    /// Databases made so far: each gets a fresh name.
    made: std::sync::atomic::AtomicUsize,
}

/// Whether a missing PostgreSQL must fail the test run (CI) rather than skip.
pub fn required() -> bool {
    crate::dovecot_required()
}

impl Postgres {
    /// Whether PostgreSQL's server programs are installed.
    pub fn available() -> bool {
        bin_dir().is_some()
    }

    /// Starts a private cluster and waits until it accepts connections.
    pub fn start() -> Result<Postgres> {
        let bin = bin_dir().ok_or_else(|| {
            anyhow!("PostgreSQL is not installed (apt-get install postgresql): no initdb")
        })?;
        let dir = tempfile::Builder::new()
            .prefix("mailbroker-postgres-")
            .tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let owner = match unsafe { libc::geteuid() } {
            0 => Some(postgres_user()?),
            _ => None,
        };
        let data = dir.path().join("data");
        std::fs::create_dir(&data)?;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))?;
        if let Some((uid, gid)) = owner {
            crate::dovecot::chown(dir.path(), uid, gid)?;
            crate::dovecot::chown(&data, uid, gid)?;
        }
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                USER,
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ])
            .stdout(Stdio::null());
        let out = as_owner(&mut initdb, owner).output()?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let tls = dir.path().join("tls");
        std::fs::create_dir(&tls)?;
        let ca = crate::TestCa::generate(&tls)?;
        // The server reads its key only if no one else can.
        std::fs::set_permissions(&ca.key_pem, std::fs::Permissions::from_mode(0o600))?;
        if let Some((uid, gid)) = owner {
            for file in [&tls, &ca.cert_pem, &ca.key_pem, &ca.ca_pem] {
                crate::dovecot::chown(file, uid, gid)?;
            }
        }
        let port = crate::dovecot::free_port()?;
        let mut pg = Postgres {
            dir,
            child: None,
            port,
            ca,
            bin,
            owner,
            made: Default::default(),
        };
        pg.serve()?;
        pg.wait_ready()?;
        Ok(pg)
    }

    /// Starts the server on the cluster's data, port and certificate, and waits until it
    /// accepts connections.
    fn serve(&mut self) -> Result<()> {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("postgres.log");
        let mut server = Command::new(self.bin.join("postgres"));
        server
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200", "-c", "ssl=on"])
            .arg("-c")
            .arg(format!("ssl_cert_file={}", self.ca.cert_pem.display()))
            .arg("-c")
            .arg(format!("ssl_key_file={}", self.ca.key_pem.display()))
            .stderr(std::fs::File::create(&log)?);
        if let Some((uid, gid)) = self.owner {
            crate::dovecot::chown(&log, uid, gid)?;
        }
        as_owner(&mut server, self.owner);
        self.child = Some(crate::dovecot::spawn_tied(server)?);
        self.wait_ready()
    }

    /// Stops the server (fast shutdown: every connection is cut), keeps it down for `down`,
    /// then starts it again on the same data and port: a database that went away and came
    /// back, as a team's may.
    pub fn restart_after(&mut self, down: Duration) -> Result<()> {
        self.stop();
        std::thread::sleep(down);
        self.serve()
    }

    /// Starts a stopped server again on the same data and port.
    pub fn start_again(&mut self) -> Result<()> {
        self.serve()
    }

    /// Stops the server (fast shutdown): a database that went away.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT: PostgreSQL's fast shutdown (SIGTERM waits for clients to leave).
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGINT);
            }
            let _ = child.wait();
        }
    }

    /// A new, empty database in this cluster, as a URL.
    pub fn database(&self) -> Result<String> {
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("index_{}_{n}", std::process::id());
        let mut createdb = Command::new(self.bin.join("createdb"));
        createdb
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .arg(&name);
        let out = as_owner(&mut createdb, self.owner).output()?;
        if !out.status.success() {
            bail!("createdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(self.url(&name))
    }

    /// The URL of database `name` in this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    /// `(total, over TLS)`: the connections to database `url` other than the asker's own,
    /// and how many of them are encrypted (`pg_stat_ssl`).
    pub fn tls_connections(&self, url: &str) -> Result<(u32, u32)> {
        let name = url.rsplit('/').next().unwrap_or_default();
        let name = name.split('?').next().unwrap_or_default();
        let sql = format!(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '{name}' AND a.pid <> pg_backend_pid()"
        );
        let mut psql = Command::new(self.bin.join("psql"));
        psql.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-At", "-F", " ", "-d", "postgres", "-c", &sql]);
        let out = as_owner(&mut psql, self.owner).output()?;
        if !out.status.success() {
            bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut counts = text.split_whitespace().map(str::parse::<u32>);
        match (counts.next(), counts.next()) {
            (Some(Ok(all)), Some(Ok(tls))) => Ok((all, tls)),
            _ => bail!("psql answered {text:?}"),
        }
    }

    /// A plain-text dump of database `url`'s every table (for scans of what it holds).
    pub fn dump(&self, url: &str) -> Result<String> {
        let name = url.rsplit('/').next().unwrap_or_default();
        let mut dump = Command::new(self.bin.join("pg_dump"));
        dump.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .arg(name);
        let out = as_owner(&mut dump, self.owner).output()?;
        if !out.status.success() {
            bail!("pg_dump failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The server's own output so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Stops this server and removes its files when the process exits, for a server that
    /// lives in a `static` (whose `Drop` never runs).
    pub fn stop_at_exit(&self) {
        if let Some(child) = self.child.as_ref() {
            crate::dovecot::stop_at_exit(child.id(), self.dir.path());
        }
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("postgres exited at start ({status}): {}", self.log());
            }
            if self.log().contains("ready to accept connections") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("postgres was not ready within 30 s: {}", self.log())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory of the newest installed PostgreSQL's programs (Debian keeps them by
/// version under /usr/lib/postgresql).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn postgres_user() -> Result<(u32, u32)> {
    let name = std::ffi::CString::new("postgres")?;
    // SAFETY: `name` is NUL-terminated; the entry is copied out before any other call.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        bail!(
            "no postgres user: install PostgreSQL from the distribution (apt-get install postgresql)"
        );
    }
    Ok(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// Runs `cmd` as `owner` when one is given (root runs the cluster as `postgres`).
fn as_owner(cmd: &mut Command, owner: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = owner {
        // Before the parent-death signal `spawn_tied` sets: a change of user clears it.
        cmd.uid(uid).gid(gid);
    }
    cmd.current_dir("/")
}

/// One cluster for all the tests of a process, started on first use; `None` outside CI when
/// PostgreSQL is missing (under CI that fails instead).
pub fn shared() -> Option<&'static Postgres> {
    static SHARED: std::sync::OnceLock<Option<Postgres>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| {
            if !Postgres::available() {
                assert!(
                    !required(),
                    "CI=true but PostgreSQL is missing: .ci/run must install postgresql"
                );
                return None;
            }
            let pg = Postgres::start()
                .context("starting a private PostgreSQL")
                .unwrap_or_else(|e| panic!("{e:#}"));
            pg.stop_at_exit();
            Some(pg)
        })
        .as_ref()
}
