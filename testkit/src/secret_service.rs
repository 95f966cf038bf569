//! A private Secret Service for tests: a D-Bus session bus of its own with gnome-keyring's
//! secrets component on it, unlocked, under a temporary home. mailbroker run with `env()`
//! keeps its account secrets there; nothing touches the desktop's own keyring.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

/// A session bus that only listens: no service activation, no policy limits.
const BUS_CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=DIR</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

pub struct SecretService {
    bus: Child,
    keyring: Child,
    address: String,
    _home: tempfile::TempDir,
}

impl SecretService {
    /// Whether dbus-daemon and gnome-keyring-daemon are installed; `false` skips a test
    /// outside CI and fails it in CI.
    pub fn available() -> bool {
        let found = ["dbus-daemon", "gnome-keyring-daemon"].iter().all(|bin| {
            Command::new("which")
                .arg(bin)
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if !found {
            assert!(
                !crate::dovecot_required(),
                "CI=true but dbus-daemon or gnome-keyring-daemon is missing: .ci/run installs them"
            );
            eprintln!("skipping: no dbus-daemon or gnome-keyring-daemon");
        }
        found
    }

    pub fn start() -> Result<SecretService> {
        let home = tempfile::tempdir()?;
        // A bus of our own without service activation: the system's session configuration
        // would start a second, locked gnome-keyring on the first call that races ours.
        let config = home.path().join("bus.conf");
        std::fs::write(
            &config,
            BUS_CONFIG.replace("DIR", &home.path().display().to_string()),
        )?;
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("start dbus-daemon")?;
        let mut line = String::new();
        BufReader::new(bus.stdout.take().context("bus stdout")?).read_line(&mut line)?;
        let address = line.trim().to_string();
        if address.is_empty() {
            bail!("dbus-daemon printed no address");
        }
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path())
            .env("XDG_RUNTIME_DIR", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start gnome-keyring-daemon")?;
        // The password of the new login keyring, which --unlock reads from stdin.
        let mut stdin = keyring.stdin.take().context("keyring stdin")?;
        stdin.write_all(b"test-keyring-password\n")?;
        drop(stdin);
        let service = SecretService {
            bus,
            keyring,
            address,
            _home: home,
        };
        service.wait_ready()?;
        Ok(service)
    }

    /// Waits until the service answers with its default collection (the unlocked login
    /// keyring it creates at start).
    fn wait_ready(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let answer = Command::new("dbus-send")
                .args([
                    "--session",
                    "--print-reply",
                    "--dest=org.freedesktop.secrets",
                    "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.ReadAlias",
                    "string:default",
                ])
                .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
                .stderr(Stdio::null())
                .output()?;
            if String::from_utf8_lossy(&answer.stdout).contains("/collection/") {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        bail!("the secret service did not come up")
    }

    /// Freezes (`true`) or thaws the keyring daemon: a keyring that is there but never
    /// answers, as a hung or locked-up one does.
    pub fn freeze(&self, frozen: bool) {
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        // SAFETY: kill has no memory preconditions; the pid is our own child's.
        unsafe { libc::kill(self.keyring.id() as i32, signal) };
    }

    /// The environment that points a process at this service.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![("DBUS_SESSION_BUS_ADDRESS", self.address.clone())]
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for child in [&mut self.keyring, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
