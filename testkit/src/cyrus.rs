//! A private Cyrus 3.6 serving JMAP (RFC 8620/8621) on a loopback port: a real JMAP server
//! for the JMAP adapter's tests. Its master starts as root and drops to the `cyrus` user, so
//! the harness needs root (CI runs as root).
//!
//! Users live in a private sasldb; a user's mailboxes are made by delivering a first message
//! over LMTP (`autocreate_post`), which the harness then destroys, and the special folders get
//! their JMAP roles by `Mailbox/set`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};

use crate::PASSWORD;

const BIN: &str = "/usr/lib/cyrus/bin";
/// The special folders every user gets, with their JMAP roles.
const FOLDERS: [(&str, &str); 5] = [
    ("Archive", "archive"),
    ("Drafts", "drafts"),
    ("Junk", "junk"),
    ("Sent", "sent"),
    ("Trash", "trash"),
];

static SHARED: std::sync::OnceLock<Option<Cyrus>> = std::sync::OnceLock::new();

/// The Cyrus a test binary shares, started once on a runtime of its own (a test's runtime
/// ends with the test); `None` where it is not installed outside CI, where a missing one
/// fails the test instead.
pub fn shared() -> Option<&'static Cyrus> {
    SHARED
        .get_or_init(|| {
            if !Cyrus::available() {
                assert!(
                    !crate::dovecot_required(),
                    "CI=true but cyrus is not installed: .ci/run must install cyrus-common, cyrus-caldav and sasl2-bin"
                );
                eprintln!("skipping: cyrus is not installed, or this is not root");
                return None;
            }
            let start = || tokio::runtime::Runtime::new()?.block_on(Cyrus::start());
            let server = std::thread::spawn(start)
                .join()
                .map_err(|_| anyhow!("starting cyrus panicked"))
                .and_then(|started| started)
                .expect("start cyrus");
            server.stop_at_exit();
            Some(server)
        })
        .as_ref()
}

pub struct Cyrus {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The JMAP (HTTP) port; the session resource is `/jmap`, found from `/.well-known/jmap`.
    pub port: u16,
    /// Plain IMAP to the same mail, Cyrus's own imapd (`private_imapd`).
    pub imap_port: u16,
    /// JMAP over TLS, with a certificate for `localhost` from `ca`.
    pub https_port: u16,
    /// ManageSieve (timsieved), where each user's Sieve scripts are kept.
    pub sieve_port: u16,
    pub ca: crate::TestCa,
    /// Held while a user is set up or seeded: Cyrus 3.6 refuses some emails created in a
    /// user's mailboxes while another user's are being made.
    setup: tokio::sync::Mutex<()>,
}

impl Cyrus {
    /// Whether Cyrus's master, httpd, lmtpd, deliver and saslpasswd2 are installed, and this
    /// process may start the master (root).
    pub fn available() -> bool {
        let root = unsafe { libc::geteuid() } == 0;
        let installed = ["master", "httpd", "lmtpd", "deliver"]
            .iter()
            .all(|b| Path::new(BIN).join(b).exists());
        root && installed && Path::new("/usr/sbin/saslpasswd2").exists()
    }

    /// Starts a private Cyrus and waits until its JMAP session answers.
    pub async fn start() -> Result<Cyrus> {
        if !Cyrus::available() {
            bail!(
                "cyrus is not installed (apt-get install cyrus-common cyrus-caldav sasl2-bin), or this is not root"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("mailbroker-cyrus-")
            .tempdir()?;
        let d = dir.path();
        for sub in ["conf", "spool", "run", "sieve"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        let (port, imap_port) = (crate::dovecot::free_port()?, crate::dovecot::free_port()?);
        let https_port = crate::dovecot::free_port()?;
        let sieve_port = crate::dovecot::free_port()?;
        let ca = crate::TestCa::generate(d)?;
        std::fs::create_dir_all(d.join("bin"))?;
        std::fs::copy(private_imapd()?, d.join("bin/imapd"))?;
        std::fs::write(d.join("imapd.conf"), imapd_conf(d))?;
        std::fs::write(
            d.join("cyrus.conf"),
            cyrus_conf(d, (port, imap_port, https_port), sieve_port),
        )?;
        chown_tree(d)?;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
        let mut cmd = Command::new(Path::new(BIN).join("master"));
        cmd.arg("-C")
            .arg(d.join("imapd.conf"))
            .arg("-M")
            .arg(d.join("cyrus.conf"))
            .arg("-p")
            .arg(d.join("run/master.pid"))
            .stderr(Stdio::null());
        let child = crate::dovecot::spawn_tied(cmd)?;
        let mut server = Cyrus {
            dir,
            child: Some(child),
            port,
            imap_port,
            https_port,
            sieve_port,
            ca,
            setup: tokio::sync::Mutex::new(()),
        };
        server.wait_ready().await?;
        Ok(server)
    }

    /// Delivers `message` to `user` by LMTP (Cyrus's `deliver`), as a mail server would: the
    /// user's active Sieve script runs on it.
    pub fn deliver(&self, user: &str, message: &[u8]) -> Result<()> {
        use std::io::Write;
        let conf = self.dir.path().join("imapd.conf");
        let mut deliver = Command::new("runuser")
            .args(["-u", "cyrus", "--"])
            .arg(Path::new(BIN).join("deliver"))
            .arg("-C")
            .arg(&conf)
            .arg(user)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        deliver
            .stdin
            .take()
            .ok_or_else(|| anyhow!("no stdin"))?
            .write_all(message)?;
        let out = deliver.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "cyrus deliver: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// Stops this server and removes its files when the process exits, for a server that
    /// lives in a `static` (whose `Drop` never runs).
    pub fn stop_at_exit(&self) {
        if let Some(child) = self.child.as_ref() {
            crate::dovecot::stop_at_exit(child.id(), self.dir.path());
        }
    }

    /// Where the JMAP session is found (`/.well-known/jmap` leads to it).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The same over TLS, trusted with `ca`.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}", self.https_port)
    }

    /// Adds `user` (password `crate::PASSWORD`) with an empty INBOX and the special folders,
    /// each with its JMAP role.
    pub async fn add_user(&self, user: &str) -> Result<()> {
        let _one_at_a_time = self.setup.lock().await;
        let d = self.dir.path();
        let mut sasl = Command::new("/usr/sbin/saslpasswd2")
            .args(["-p", "-c", "-f"])
            .arg(d.join("sasldb2"))
            .args(["-u", "localhost", user])
            .stdin(Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = sasl.stdin.take() {
            std::io::Write::write_all(&mut stdin, PASSWORD.as_bytes())?;
        }
        if !sasl.wait()?.success() {
            bail!("saslpasswd2 failed for {user}");
        }
        chown_tree(&d.join("sasldb2"))?;
        // Delivering once makes the user's mailboxes.
        self.deliver(
            user,
            &crate::message(0, "setup@example.test", "setup", "removed at once"),
        )?;
        let boxes = self.mailboxes(user).await?;
        let roles: serde_json::Map<String, Value> = FOLDERS
            .iter()
            .filter_map(|(name, role)| Some((boxes.get(*name)?.clone(), json!({ "role": role }))))
            .collect();
        let welcome = self
            .call(user, json!([["Email/query", { "accountId": user }, "q"]]))
            .await?;
        let ids = welcome[0][1]["ids"].clone();
        let answer = self
            .call(
                user,
                json!([
                    ["Mailbox/set", { "accountId": user, "update": roles }, "r"],
                    ["Email/set", { "accountId": user, "destroy": ids }, "d"],
                ]),
            )
            .await?;
        for (n, what) in [(0, "roles"), (1, "the first message")] {
            let refused = &answer[n][1];
            if refused["notUpdated"].is_object() || refused["notDestroyed"].is_object() {
                bail!("setting up {user}: {what} refused: {refused}");
            }
        }
        Ok(())
    }

    /// `user`'s mailboxes: name → JMAP id.
    pub async fn mailboxes(
        &self,
        user: &str,
    ) -> Result<std::collections::BTreeMap<String, String>> {
        let got = self
            .call(
                user,
                json!([["Mailbox/get", { "accountId": user, "properties": ["name"] }, "m"]]),
            )
            .await?;
        let list = got[0][1]["list"]
            .as_array()
            .ok_or_else(|| anyhow!("Mailbox/get: {got}"))?;
        Ok(list
            .iter()
            .filter_map(|m| {
                Some((
                    m["name"].as_str()?.to_string(),
                    m["id"].as_str()?.to_string(),
                ))
            })
            .collect())
    }

    /// Creates `n` plain-text messages from `from` in `user`'s mailbox `mailbox` (by name),
    /// "Message 0" … in order, with `keywords` set; their JMAP ids.
    pub async fn seed(
        &self,
        user: &str,
        mailbox: &str,
        n: usize,
        from: &str,
        keywords: &[&str],
    ) -> Result<Vec<String>> {
        let _one_at_a_time = self.setup.lock().await;
        let boxes = self.mailboxes(user).await?;
        let target = boxes
            .get(mailbox)
            .ok_or_else(|| anyhow!("{user} has no mailbox {mailbox}"))?;
        let keywords: serde_json::Map<String, Value> = keywords
            .iter()
            .map(|k| (k.to_string(), json!(true)))
            .collect();
        let mut ids = Vec::with_capacity(n);
        for start in (0..n).step_by(500) {
            let create: serde_json::Map<String, Value> = (start..n.min(start + 500))
                .map(|i| (format!("m{i}"), email(i, target, from, &keywords)))
                .collect();
            let got = self
                .call(
                    user,
                    json!([["Email/set", { "accountId": user, "create": create }, "s"]]),
                )
                .await?;
            let created = &got[0][1]["created"];
            for i in start..n.min(start + 500) {
                let id = created[format!("m{i}")]["id"]
                    .as_str()
                    .ok_or_else(|| anyhow!("message {i} not created: {got}"))?;
                ids.push(id.to_string());
            }
        }
        Ok(ids)
    }

    /// What the server holds of email `id` of `user`: its keywords and mailbox ids.
    pub async fn email(&self, user: &str, id: &str) -> Result<Value> {
        let get =
            json!({ "accountId": user, "ids": [id], "properties": ["keywords", "mailboxIds"] });
        let got = self.call(user, json!([["Email/get", get, "g"]])).await?;
        Ok(got[0][1]["list"][0].clone())
    }

    /// Sends `calls` (a JMAP `methodCalls` array) as `user`, "another client"; the
    /// `methodResponses`.
    pub async fn call(&self, user: &str, calls: Value) -> Result<Value> {
        let body = json!({
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": calls,
        });
        // A client per call: a test's runtime ends with the test, and a pooled connection
        // would end with it.
        let answer = reqwest::Client::new()
            .post(format!("{}/jmap/", self.url()))
            .basic_auth(user, Some(PASSWORD))
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json::<Value>()
            .await?;
        Ok(answer["methodResponses"].clone())
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = format!("{}/.well-known/jmap", self.url());
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("cyrus master exited at start ({status})");
            }
            if reqwest::get(&url).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("cyrus did not answer on {url} within 20 s")
    }
}

impl Drop for Cyrus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }
}

/// One test message as JMAP creates it.
fn email(i: usize, mailbox: &str, from: &str, keywords: &serde_json::Map<String, Value>) -> Value {
    json!({
        "mailboxIds": { mailbox: true },
        "keywords": keywords,
        "from": [{ "email": from }],
        "to": [{ "email": "test@localhost" }],
        "subject": format!("Message {i}"),
        "messageId": [format!("m{i}.{}@example.test", from.replace('@', "."))],
        "sentAt": "2025-01-01T00:00:00Z",
        "receivedAt": "2025-01-01T00:00:00Z",
        "bodyStructure": { "type": "text/plain", "partId": "1" },
        "bodyValues": { "1": { "value": format!("Body of message {i}.") } },
    })
}

fn imapd_conf(d: &Path) -> String {
    let d = d.display();
    format!(
        "configdirectory: {d}/conf
partition-default: {d}/spool
sievedir: {d}/sieve
servername: localhost
admins: admin
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {d}/sasldb2
sasl_mech_list: PLAIN LOGIN
altnamespace: yes
unixhierarchysep: yes
specialusealways: yes
conversations: 1
conversations_db: twoskip
httpmodules: jmap
allowplaintext: yes
idlesocket: {d}/run/idle
lmtpsocket: {d}/run/lmtp
notifysocket: {d}/run/notify
mboxname_lockpath: {d}/run/lock
proc_path: {d}/run/proc
autocreate_quota: 0
autocreate_post: 1
autocreate_inbox_folders: Archive|Drafts|Junk|Sent|Trash
syslog_prefix: mailbroker-cyrus
tls_server_cert: {d}/server.pem
tls_server_key: {d}/server.key
"
    )
}

/// The master's services on (JMAP, IMAP, JMAP over TLS) ports.
fn cyrus_conf(d: &Path, (port, imap_port, https_port): (u16, u16, u16), sieve: u16) -> String {
    let d = d.display();
    format!(
        "START {{
  recover cmd=\"{BIN}/ctl_cyrusdb -r -C {d}/imapd.conf\"
}}
SERVICES {{
  http cmd=\"{BIN}/httpd -C {d}/imapd.conf\" listen=\"127.0.0.1:{port}\" prefork=1
  lmtpunix cmd=\"{BIN}/lmtpd -C {d}/imapd.conf\" listen=\"{d}/run/lmtp\" prefork=0
  imap cmd=\"{d}/bin/imapd -C {d}/imapd.conf\" listen=\"127.0.0.1:{imap_port}\" prefork=0
  https cmd=\"{BIN}/httpd -s -C {d}/imapd.conf\" listen=\"127.0.0.1:{https_port}\" prefork=0
  sieve cmd=\"{BIN}/timsieved -C {d}/imapd.conf\" listen=\"127.0.0.1:{sieve}\" prefork=0
}}
EVENTS {{
}}
"
    )
}

/// Cyrus's own imapd, so a test can act on a JMAP user's mail over IMAP too. The package
/// `cyrus-imapd` declares a conflict with other IMAP servers (Dovecot), so it is not
/// installed: the version matching the installed `cyrus-common` is fetched from the package
/// registry once (`apt-get download`) and unpacked under `target/`.
fn private_imapd() -> Result<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/cyrus-imapd");
    let imapd = dir.join("x/usr/lib/cyrus/bin/imapd");
    let _making = crate::made_once(&dir);
    if imapd.exists() {
        return Ok(imapd);
    }
    std::fs::create_dir_all(&dir)?;
    let version = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "cyrus-common"])
        .output()?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let fetched = Command::new("apt-get")
        .args(["download", "-qq"])
        .arg(format!("cyrus-imapd={version}"))
        .current_dir(&dir)
        .stderr(Stdio::null())
        .status()?;
    if !fetched.success() {
        bail!("apt-get download cyrus-imapd={version} failed");
    }
    let deb = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| anyhow!("no cyrus-imapd package in {}", dir.display()))?;
    let unpacked = Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(dir.join("x"))
        .status()?;
    if !unpacked.success() || !imapd.exists() {
        bail!("dpkg -x {} gave no imapd", deb.display());
    }
    Ok(imapd)
}

/// Gives the tree at `path` to the `cyrus` user (the master drops to it).
fn chown_tree(path: &Path) -> Result<()> {
    let status = Command::new("chown")
        .args(["-R", "cyrus:mail"])
        .arg(path)
        .status()?;
    if !status.success() {
        bail!("chown cyrus:mail {} failed", path.display());
    }
    Ok(())
}

/// `mailbroker account add jmap` arguments for `user` at `url`, the password read from the
/// environment variable `password_env`.
pub fn account_add_args(id: &str, url: &str, user: &str, password_env: &str) -> Vec<String> {
    let args = [
        "account",
        "add",
        "jmap",
        "--id",
        id,
        "--url",
        url,
        "--username",
        user,
    ];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend(["--password-env".to_string(), password_env.to_string()]);
    args
}
