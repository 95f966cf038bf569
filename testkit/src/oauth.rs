//! Playing the person at the browser for mailbroker's OAuth commands against the Gmail mock:
//! the command prints the authorization URL on stderr (`--no-browser`), the "browser" asks the
//! mock to approve and follows the redirect to mailbroker's loopback listener.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use anyhow::{Context, Result, bail};

/// What the command printed and how it ended.
pub struct OAuthRun {
    pub output: Output,
    /// Everything on stderr (including the authorization URL line).
    pub stderr: String,
    /// The URL the command asked the browser to open.
    pub url: String,
}

/// Runs `bin --home HOME --json ARGS…` (`account add gmail …`, `account login …`) and
/// completes its browser step.
pub async fn with_browser(bin: &Path, home: &Path, args: &[String]) -> Result<OAuthRun> {
    with_browser_env(bin, home, args, &[]).await
}

/// As `with_browser`, with `env` set for the command (e.g. a log level).
pub async fn with_browser_env(
    bin: &Path,
    home: &Path,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<OAuthRun> {
    browse(bin, home, args, env, false).await
}

/// As `with_browser`, but before the person's browser comes back, another page on this
/// machine sends the loopback listener a redirect of its own (a code, and a refusal, with
/// a state it made up); each must be answered 400 and leave the sign-in waiting.
pub async fn with_browser_after_forgeries(
    bin: &Path,
    home: &Path,
    args: &[String],
) -> Result<OAuthRun> {
    browse(bin, home, args, &[], true).await
}

async fn browse(
    bin: &Path,
    home: &Path,
    args: &[String],
    env: &[(&str, &str)],
    forge: bool,
) -> Result<OAuthRun> {
    let mut child = spawn(bin, home, args.iter().map(String::as_str), env)?;
    let (url, seen, rest) = read_until(&mut child, "authorization URL", |line| {
        (line.starts_with("http") && line.contains("code_challenge="))
            .then(|| line.trim().to_string())
    })
    .await?;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    if forge {
        let parsed = reqwest::Url::parse(&url)?;
        let redirect = parsed
            .query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .map(|(_, v)| v.into_owned())
            .context("no redirect_uri in the authorization URL")?;
        for query in [
            "code=forged&state=made-up",
            "error=access_denied&state=made-up",
        ] {
            let answer = browser.get(format!("{redirect}?{query}")).send().await?;
            if answer.status() != 400 {
                bail!(
                    "a forged redirect ({query}) was answered {}",
                    answer.status()
                );
            }
        }
    }
    let consent = browser.get(&url).send().await?;
    if consent.status() != 302 {
        bail!("the mock did not approve: {}", consent.status());
    }
    let back = consent
        .headers()
        .get("location")
        .context("no redirect")?
        .to_str()?
        .to_string();
    if !back.starts_with("http://127.0.0.1:") {
        bail!("redirect is not to the loopback listener: {back}");
    }
    let landed = browser.get(&back).send().await?;
    if landed.status() != 200 {
        bail!("the loopback listener answered {}", landed.status());
    }
    let (output, tail) = finish(child, rest).await?;
    Ok(OAuthRun {
        output,
        stderr: seen + &tail,
        url,
    })
}

/// The client file Google's console would download for the mock at `mock_url`'s Desktop
/// client, saved in `dir` (a test's own directory, removed with it).
pub fn client_file(dir: &Path, mock_url: &str) -> PathBuf {
    let path = dir.join("client_secret_mock.apps.googleusercontent.com.json");
    let json = mailbroker_mock_gmail::client_file(mock_url);
    std::fs::write(&path, json.to_string()).expect("the client file is written");
    path
}

/// The arguments that point an OAuth command at the mock at `mock_url`; an `account add`
/// signs in with the client file (`--credentials`), saved in `dir`, as a person would.
pub fn mock_args(dir: &Path, mock_url: &str, first: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    if first.get(1) == Some(&"add") {
        args.push("--credentials".into());
        args.push(client_file(dir, mock_url).display().to_string());
    }
    args.extend(endpoint_args(mock_url));
    args
}

/// The mock's endpoints, and no browser: the arguments every OAuth command against it takes.
pub fn endpoint_args(mock_url: &str) -> Vec<String> {
    vec![
        "--no-browser".to_string(),
        "--api-base".into(),
        mock_url.to_string(),
        "--auth-url".into(),
        format!("{mock_url}/o/oauth2/v2/auth"),
        "--token-url".into(),
        format!("{mock_url}/token"),
    ]
}

/// Posts `body` to a mock's control route `/_mock/{path}` and returns its JSON answer.
pub async fn control(mock_url: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    reqwest::Client::new()
        .post(format!("{mock_url}/_mock/{path}"))
        .json(&body)
        .send()
        .await
        .expect("the mock answers its control route")
        .json()
        .await
        .expect("a JSON answer from the mock")
}

/// Runs `bin --home HOME --json ARGS…` (`account add graph …`, `account login …`) and plays
/// the person at the device code page: reads the code the command shows on stderr and
/// approves it on the mock at `mock_url`. `url` of the answer is the user code.
pub async fn with_device_code(
    bin: &Path,
    home: &Path,
    args: &[&str],
    mock_url: &str,
) -> Result<OAuthRun> {
    with_device_code_env(bin, home, args, mock_url, &[]).await
}

/// As `with_device_code`, with `env` set for the command.
pub async fn with_device_code_env(
    bin: &Path,
    home: &Path,
    args: &[&str],
    mock_url: &str,
    env: &[(&str, &str)],
) -> Result<OAuthRun> {
    let mut child = spawn(bin, home, args.iter().copied(), env)?;
    let (code, seen, rest) = read_until(&mut child, "user code", |line| {
        line.split("enter the code ")
            .nth(1)
            .map(|c| c.trim().to_string())
    })
    .await?;
    control(
        mock_url,
        "device/approve",
        serde_json::json!({ "user_code": code }),
    )
    .await;
    let (output, tail) = finish(child, rest).await?;
    Ok(OAuthRun {
        output,
        stderr: seen + &tail,
        url: code,
    })
}

/// Starts `bin --home HOME --json ARGS…` with stdout and stderr piped.
fn spawn<'a>(
    bin: &Path,
    home: &Path,
    args: impl Iterator<Item = &'a str>,
    env: &[(&str, &str)],
) -> Result<Child> {
    Command::new(bin)
        // Never the keyring of the desktop the tests run on.
        .env("MAILBROKER_SECRET_STORE", "index")
        .envs(env.iter().copied())
        .arg("--home")
        .arg(home)
        .arg("--json")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("start mailbroker")
}

type Stderr = BufReader<std::process::ChildStderr>;

/// Reads the command's stderr until `found` picks something out of a line (`what` names it
/// for the error when it never comes): that, what was read, and the rest of stderr.
async fn read_until(
    child: &mut Child,
    what: &'static str,
    found: impl Fn(&str) -> Option<String> + Send + 'static,
) -> Result<(String, String, Stderr)> {
    let stderr = child.stderr.take().context("stderr")?;
    tokio::task::spawn_blocking(move || -> Result<_> {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        let mut seen = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                bail!("no {what} on stderr: {seen}");
            }
            seen.push_str(&line);
            if let Some(hit) = found(&line) {
                return Ok((hit, seen, reader));
            }
        }
    })
    .await?
}

/// Waits for the command: its output, and what it wrote to stderr after `rest` was taken.
async fn finish(child: Child, mut rest: Stderr) -> Result<(Output, String)> {
    tokio::task::spawn_blocking(move || -> Result<_> {
        let mut tail = String::new();
        std::io::Read::read_to_string(&mut rest, &mut tail).ok();
        Ok((child.wait_with_output()?, tail))
    })
    .await?
}
