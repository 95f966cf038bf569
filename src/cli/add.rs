//! `mailbroker account add …`: each provider's own arguments, read into what its adapter's
//! `setup` takes, then stored (`accounts::add`).

use std::io::BufRead;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use mailbroker_core::{AccountId, Error, Result};
use mailbroker_imap::{ImapConfig, TlsMode};

use super::account::{ConsentArgs, print_account};
use crate::accounts;
use crate::store::Store;

/// Adds the account `cmd` describes.
pub(super) async fn add(store: &Store, cmd: AddCommand, json: bool) -> Result<()> {
    if !matches!(cmd, AddCommand::Applescript(_)) {
        store.can_keep_secrets()?;
    }
    match cmd {
        AddCommand::Imap(args) => add_imap(store, &args, json).await,
        AddCommand::Gmail(args) => add_gmail(store, &args, json).await,
        AddCommand::Graph(args) => add_graph(store, &args, json).await,
        AddCommand::Jmap(args) => add_jmap(store, &args, json).await,
        AddCommand::Applescript(args) => {
            let id: AccountId = args.id.parse()?;
            accounts::check_new(store, &id).await?;
            let new = mailbroker_applescript::setup(&args.mail_account, args.email.clone()).await?;
            print_account(&accounts::add(store, id, new).await?, json)
        }
    }
}

#[derive(Debug, Args)]
pub struct GmailArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub email: Option<String>,
    /// The OAuth client file Google's console downloads for a Desktop app client
    /// (`client_secret_….json`): its client id and secret (docs/setup-google.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["client_id", "client_secret_file"])]
    pub credentials: Option<PathBuf>,
    /// The OAuth client id, where no client file is given; Google then needs the secret too.
    #[arg(
        long,
        env = "MAILBROKER_GMAIL_CLIENT_ID",
        required_unless_present = "credentials"
    )]
    pub client_id: Option<String>,
    /// A file holding the client's secret alone, with --client-id.
    #[arg(long, value_name = "FILE")]
    pub client_secret_file: Option<PathBuf>,
    /// Also ask for the full scope (https://mail.google.com/), which permanent deletion needs.
    #[arg(long)]
    pub allow_permanent_delete: bool,
    #[command(flatten)]
    pub consent: ConsentArgs,
    /// Gmail API root.
    #[arg(long, default_value = mailbroker_gmail::oauth::GOOGLE_API_BASE)]
    pub api_base: String,
    /// Authorization endpoint.
    #[arg(long, default_value = mailbroker_gmail::oauth::GOOGLE_AUTH_URL)]
    pub auth_url: String,
    /// Token endpoint.
    #[arg(long, default_value = mailbroker_gmail::oauth::GOOGLE_TOKEN_URL)]
    pub token_url: String,
    /// The account's Gmail API quota in units per second (Google's default per user is 250).
    #[arg(long, value_name = "UNITS", default_value_t = mailbroker_gmail::oauth::DEFAULT_QUOTA)]
    pub quota: u32,
}

#[derive(Debug, Subcommand)]
pub enum AddCommand {
    /// An IMAP account (password or app password).
    Imap(ImapArgs),
    /// A Gmail account (OAuth in the browser: authorization code with PKCE).
    Gmail(GmailArgs),
    /// An account that exists only in macOS Mail.app, driven by AppleScript: read, flagged,
    /// moves and deletion to the trash; no tags, no permanent deletion.
    Applescript(AppleScriptArgs),
    /// A Microsoft account (Outlook.com, Microsoft 365) over Microsoft Graph, signed in by
    /// the device code flow (a code to type on any device), or in a browser with --browser.
    Graph(GraphArgs),
    /// A JMAP account (Fastmail with an API token, a Cyrus or Stalwart server with a
    /// password).
    Jmap(JmapArgs),
}

#[derive(Debug, Args)]
pub struct JmapArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    /// The JMAP session URL, or the server's (its /.well-known/jmap leads to the session).
    /// Plain http:// only to this machine.
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub username: String,
    /// Read the password (Basic auth) from this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with_all = ["password_stdin", "token_env"])]
    pub password_env: Option<String>,
    /// Read the password from the first line of standard input.
    #[arg(long, conflicts_with = "token_env")]
    pub password_stdin: bool,
    /// Read an API token (Bearer auth, as Fastmail's) from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// Trust this CA (PEM) in addition to the public roots.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// An https origin (https://host) the session may name for its URLs besides its own, to
    /// which the credentials then go too (by default only the session's own origin).
    #[arg(long, value_name = "ORIGIN")]
    pub trust_origin: Vec<String>,
    /// What a tag is on the server: a keyword of the message, or a mailbox it is in beside
    /// its others (Fastmail's labels mode).
    #[arg(long, value_name = "KIND", default_value = "keywords",
          value_parser = ["keywords", "mailboxes"])]
    pub tags: String,
    /// The account's address, for display (the user name when it is one).
    #[arg(long)]
    pub email: Option<String>,
    /// The ManageSieve port on the session's host, where its rules are kept (4190 unless
    /// told).
    #[arg(long, value_name = "PORT")]
    pub sieve_port: Option<u16>,
}

#[derive(Debug, Args)]
pub struct AppleScriptArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    /// The account's name in Mail.app (Mail > Settings > Accounts).
    #[arg(long)]
    pub mail_account: String,
    #[arg(long)]
    pub email: Option<String>,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub email: Option<String>,
    /// The application (client) id of an app registered in Microsoft Entra as a public
    /// client with the Mail.ReadWrite, offline_access, User.Read and MailboxSettings.ReadWrite
    /// permissions (docs/setup-microsoft.md).
    #[arg(long, env = "MAILBROKER_GRAPH_CLIENT_ID")]
    pub client_id: String,
    /// common, organizations, consumers or a tenant id.
    #[arg(long, default_value = "common")]
    pub tenant: String,
    /// Microsoft Graph root.
    #[arg(long, default_value = mailbroker_graph::oauth::GRAPH_BASE)]
    pub graph_base: String,
    /// The Microsoft identity platform root.
    #[arg(long, default_value = mailbroker_graph::oauth::MICROSOFT_AUTHORITY)]
    pub authority: String,
    #[command(flatten)]
    pub consent: ConsentArgs,
}

#[derive(Debug, Args)]
pub struct ImapArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    /// A provider's server and what it needs: gmail, icloud, yahoo, aol, fastmail, outlook,
    /// zoho, mailbox.org or posteo (--host, --port and --tls still override it).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    #[arg(long)]
    pub host: Option<String>,
    #[arg(long)]
    pub port: Option<u16>,
    /// implicit (993; the default), starttls (143) or none.
    #[arg(long)]
    pub tls: Option<String>,
    #[arg(long)]
    pub username: String,
    /// Read the password from this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with = "password_stdin")]
    pub password_env: Option<String>,
    /// Read the password from the first line of standard input.
    #[arg(long)]
    pub password_stdin: bool,
    /// Trust this CA (PEM) in addition to the public roots.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// The account's address, for display.
    #[arg(long)]
    pub email: Option<String>,
    /// Do not use this advertised extension (e.g. QRESYNC on a server where it misbehaves).
    #[arg(long = "disable-extension", value_name = "EXT")]
    pub disable_extension: Vec<String>,
    /// Allow --tls none to a host other than this machine: the password then crosses the
    /// network in clear text.
    #[arg(long)]
    pub allow_plaintext: bool,
    /// The server's ManageSieve port, where its rules are kept (4190 unless told).
    #[arg(long, value_name = "PORT")]
    pub sieve_port: Option<u16>,
}

fn read_password(args: &ImapArgs) -> Result<String> {
    let password = password_given(args.password_env.as_deref(), args.password_stdin)?;
    mailbroker_core::secrets::register(&password);
    if password.contains(['\r', '\n']) {
        return Err(
            Error::validation("the password holds a line break, which IMAP cannot send")
                .with_next_step("check the variable or input it is read from"),
        );
    }
    Ok(password)
}

/// The password from the variable `env`, or from the first line of stdin.
fn password_given(env: Option<&str>, stdin: bool) -> Result<String> {
    if let Some(var) = env {
        return std::env::var(var).map_err(|_| {
            Error::validation(format!("environment variable {var} is not set"))
                .with_next_step(format!("export {var}=… or use --password-stdin"))
        });
    }
    if stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::validation(format!("cannot read the password from stdin: {e}")))?;
        let password = line.trim_end_matches(['\r', '\n']).to_string();
        if password.is_empty() {
            return Err(Error::validation("standard input held no password"));
        }
        return Ok(password);
    }
    Err(Error::validation("no password given")
        .with_next_step("pass --password-env VAR or --password-stdin"))
}

/// The server the arguments name: a preset's, with what is given explicitly over it.
fn server_of(args: &ImapArgs) -> Result<(String, u16, TlsMode)> {
    let preset = args
        .preset
        .as_deref()
        .map(mailbroker_imap::presets::preset)
        .transpose()?;
    let tls = match &args.tls {
        Some(t) => t.parse()?,
        None => preset.map_or(TlsMode::Implicit, |p| p.tls),
    };
    let host = args.host.clone().or(preset.map(|p| p.host.to_string()));
    let port = args.port.or(preset.map(|p| p.port));
    match (host, port) {
        (Some(host), Some(port)) => Ok((host, port, tls)),
        (host, _) => {
            let known: Vec<&str> = mailbroker_imap::presets::PRESETS
                .iter()
                .map(|p| p.name)
                .collect();
            let missing = if host.is_none() { "--host" } else { "--port" };
            Err(
                Error::validation(format!("which server? {missing} is missing")).with_next_step(
                    format!(
                        "pass --host and --port, or --preset with one of: {}",
                        known.join(", ")
                    ),
                ),
            )
        }
    }
}

fn imap_config(args: &ImapArgs) -> Result<ImapConfig> {
    let (host, port, tls) = server_of(args)?;
    let ca_pem = match &args.ca_file {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Error::validation(format!("cannot read --ca-file {}: {e}", path.display()))
        })?),
        None => None,
    };
    Ok(ImapConfig {
        host,
        port,
        tls,
        username: args.username.clone(),
        password: read_password(args)?,
        ca_pem,
        disabled_extensions: args.disable_extension.clone(),
        allow_plaintext: args.allow_plaintext,
        sieve_port: args.sieve_port,
    })
}

/// The OAuth client to sign in with: from Google's client file, or an id and a secret.
fn gmail_client(args: &GmailArgs) -> Result<(String, Option<String>)> {
    let read = |f: &PathBuf| crate::util::read_small(f, "client file");
    if let Some(file) = &args.credentials {
        let client = mailbroker_gmail::oauth::ClientFile::parse(&read(file)?)?;
        return Ok((client.client_id, Some(client.client_secret)));
    }
    let secret = match &args.client_secret_file {
        Some(f) => Some(read(f)?.trim().to_string()),
        None => None,
    };
    let id = args.client_id.clone().ok_or_else(|| {
        Error::validation("say which OAuth client to sign in with")
            .with_next_step("pass --credentials client_secret_….json (docs/setup-google.md)")
    })?;
    Ok((id, secret))
}

async fn add_gmail(store: &Store, args: &GmailArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    let (client_id, secret) = gmail_client(args)?;
    let settings = mailbroker_gmail::oauth::OAuthSettings {
        client_id,
        auth_url: args.auth_url.clone(),
        token_url: args.token_url.clone(),
        api_base: args.api_base.clone(),
        quota_units_per_sec: args.quota,
    };
    accounts::check_new(store, &id).await?;
    let new = mailbroker_gmail::setup(
        &id,
        args.email.clone(),
        settings,
        secret,
        args.allow_permanent_delete,
        args.consent.consent(),
    )
    .await?;
    print_account(&accounts::add(store, id, new).await?, json)
}

async fn add_imap(store: &Store, args: &ImapArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    let config = imap_config(args)?;
    config.check_plaintext()?;
    if config.tls == TlsMode::None && args.allow_plaintext {
        crate::say_err!(
            "warning: --tls none with --allow-plaintext: the password goes to {} in \
             clear text, readable by anyone on the network path",
            config.host
        );
    }
    accounts::check_new(store, &id).await?;
    if let Some(p) = args.preset.as_deref() {
        let preset = mailbroker_imap::presets::preset(p)?;
        crate::say_err!("{}: {}", preset.name, preset.note);
    }
    let new = mailbroker_imap::setup(&config, args.email.clone()).await?;
    print_account(&accounts::add(store, id, new).await?, json)
}

async fn add_graph(store: &Store, args: &GraphArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    accounts::check_new(store, &id).await?;
    let settings = mailbroker_graph::oauth::GraphSettings {
        client_id: args.client_id.clone(),
        tenant: args.tenant.clone(),
        authority: args.authority.clone(),
        graph_base: args.graph_base.clone(),
    };
    let how = args.consent.consent();
    let new = mailbroker_graph::setup(&id, args.email.clone(), settings, how).await?;
    print_account(&accounts::add(store, id, new).await?, json)
}

async fn add_jmap(store: &Store, args: &JmapArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    let (auth, secret) = match &args.token_env {
        Some(var) => ("bearer", password_given(Some(var), false)?),
        None => (
            "basic",
            password_given(args.password_env.as_deref(), args.password_stdin)?,
        ),
    };
    mailbroker_core::secrets::register(&secret);
    let settings = mailbroker_jmap::JmapSettings {
        url: args.url.clone(),
        username: args.username.clone(),
        auth: auth.to_string(),
        ca_file: match &args.ca_file {
            Some(path) => Some(absolute(path)?),
            None => None,
        },
        trusted_origins: args
            .trust_origin
            .iter()
            .map(|o| o.trim_end_matches('/').to_string())
            .collect(),
        tags: mailbroker_jmap::TagMode::parse(&args.tags)?,
        sieve_port: args.sieve_port,
    };
    settings.check_plaintext()?;
    accounts::check_new(store, &id).await?;
    let new = mailbroker_jmap::setup(settings, secret, args.email.clone()).await?;
    print_account(&accounts::add(store, id, new).await?, json)
}

/// `path` as an absolute path, as it is stored for later sessions run from anywhere.
fn absolute(path: &std::path::Path) -> Result<String> {
    let full = std::path::absolute(path).map_err(|e| {
        Error::validation(format!("cannot use the CA file {}: {e}", path.display()))
    })?;
    Ok(full.display().to_string())
}
