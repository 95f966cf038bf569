//! `mailbroker account …`: adding an account with each provider's own arguments (then its
//! adapter's `setup`), listing, showing, removing, login and the doctor.

use std::io::BufRead;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use mailbroker_core::{AccountId, Error, Result};
use mailbroker_imap::{ImapConfig, TlsMode};

use super::{rfc3339, views};
use crate::accounts;
use crate::output::{Terminal, print_json};
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Add an account.
    #[command(subcommand)]
    Add(AddCommand),
    /// List accounts.
    List,
    /// Show an account, its capabilities and mailboxes.
    Show { id: String },
    /// Remove an account with its indexed messages and stored secrets.
    Remove { id: String },
    /// Change an account's settings: its fallback route.
    Set(SetArgs),
    /// Authorize an OAuth account again (after a revoke or an expired grant).
    Login {
        id: String,
        #[command(flatten)]
        consent: ConsentArgs,
    },
    /// Authorize again with the full Gmail scope, which permanent deletion needs.
    UpgradeScope {
        id: String,
        #[command(flatten)]
        consent: ConsentArgs,
    },
    /// Check an OAuth account: token (refreshed if needed), scopes, API reachability.
    Doctor { id: String },
}

#[derive(Debug, Args)]
pub struct ConsentArgs {
    /// Do not open a browser; print the URL, and also accept the final redirect URL pasted
    /// on stdin (for headless machines).
    #[arg(long)]
    pub no_browser: bool,
    /// Sign in in a browser (authorization code with PKCE) where the provider's default is
    /// a device code (Microsoft accounts).
    #[arg(long)]
    pub browser: bool,
}

impl ConsentArgs {
    fn consent(&self) -> mailbroker_core::Consent {
        mailbroker_core::Consent {
            open_browser: !self.no_browser,
            paste: self.no_browser,
            browser: self.browser,
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
    /// The OAuth client id (a Google Cloud "Desktop app" client).
    #[arg(long, env = "MAILBROKER_GMAIL_CLIENT_ID")]
    pub client_id: String,
    /// A file holding the client secret, for clients that have one.
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
pub struct SetArgs {
    pub id: String,
    /// The route to use when the account's own is unavailable (its server is down or refuses
    /// the credentials). Only `applescript` (macOS Mail.app) exists; it carries read, flagged,
    /// moves and deletion to the trash.
    #[arg(long, value_parser = ["applescript"], requires = "mail_account", conflicts_with = "no_fallback")]
    pub fallback: Option<String>,
    /// The account's name in Mail.app, for `--fallback applescript`.
    #[arg(long, requires = "fallback")]
    pub mail_account: Option<String>,
    /// Remove the fallback route: the account's own route only.
    #[arg(long)]
    pub no_fallback: bool,
    /// Let `delete-staged ID --yes` delete this account's mail for good with nobody at a
    /// terminal (for a cron job you set up). Asked at your terminal, and journaled.
    #[arg(long, conflicts_with_all = ["no_unattended_deletions", "fallback", "no_fallback"])]
    pub unattended_deletions: bool,
    /// Take that back: permanent deletions ask at a terminal again.
    #[arg(long, conflicts_with_all = ["fallback", "no_fallback"])]
    pub no_unattended_deletions: bool,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Short name for the account (letters, digits, '-', '_').
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub email: Option<String>,
    /// The application (client) id of an app registered in Microsoft Entra as a public
    /// client with the Mail.ReadWrite, offline_access and User.Read permissions.
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
    #[arg(long)]
    pub host: String,
    #[arg(long)]
    pub port: u16,
    /// implicit (993), starttls (143) or none.
    #[arg(long, default_value = "implicit")]
    pub tls: String,
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
}

fn read_password(args: &ImapArgs) -> Result<String> {
    let password = password_given(args)?;
    mailbroker_core::secrets::register(&password);
    if password.contains(['\r', '\n']) {
        return Err(
            Error::validation("the password holds a line break, which IMAP cannot send")
                .with_next_step("check the variable or input it is read from"),
        );
    }
    Ok(password)
}

fn password_given(args: &ImapArgs) -> Result<String> {
    if let Some(var) = &args.password_env {
        return std::env::var(var).map_err(|_| {
            Error::validation(format!("environment variable {var} is not set"))
                .with_next_step(format!("export {var}=… or use --password-stdin"))
        });
    }
    if args.password_stdin {
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

fn imap_config(args: &ImapArgs) -> Result<ImapConfig> {
    let tls: TlsMode = args.tls.parse()?;
    let ca_pem = match &args.ca_file {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Error::validation(format!("cannot read --ca-file {}: {e}", path.display()))
        })?),
        None => None,
    };
    Ok(ImapConfig {
        host: args.host.clone(),
        port: args.port,
        tls,
        username: args.username.clone(),
        password: read_password(args)?,
        ca_pem,
        disabled_extensions: args.disable_extension.clone(),
        allow_plaintext: args.allow_plaintext,
    })
}

async fn add_gmail(store: &Store, args: &GmailArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    let secret = match &args.client_secret_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| Error::validation(format!("cannot read {}: {e}", f.display())))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let settings = mailbroker_gmail::oauth::OAuthSettings {
        client_id: args.client_id.clone(),
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

fn print_account(view: &accounts::AccountView, json: bool) -> Result<()> {
    if json {
        return print_json(Some("account"), &views::AccountShowJson::from(view));
    }
    crate::say!(
        "account {} ready ({} mailboxes; capabilities: {})",
        view.account.id,
        view.mailboxes.len(),
        view.account.capabilities.extensions.join(" ")
    );
    crate::say!("next: mailbroker sync --account {}", view.account.id);
    Ok(())
}

pub(super) async fn account(store: &Store, cmd: AccountCommand, json: bool) -> Result<()> {
    match cmd {
        AccountCommand::Add(AddCommand::Imap(args)) => add_imap(store, &args, json).await,
        AccountCommand::Add(AddCommand::Gmail(args)) => add_gmail(store, &args, json).await,
        AccountCommand::Add(AddCommand::Graph(args)) => add_graph(store, &args, json).await,
        AccountCommand::Add(AddCommand::Applescript(args)) => {
            let id: AccountId = args.id.parse()?;
            accounts::check_new(store, &id).await?;
            let new = mailbroker_applescript::setup(&args.mail_account, args.email.clone()).await?;
            print_account(&accounts::add(store, id, new).await?, json)
        }
        AccountCommand::Set(args) => set(store, &args, json).await,
        AccountCommand::Login { id, consent } => {
            let id: AccountId = id.parse()?;
            let view = accounts::login(store, &id, false, consent.consent()).await?;
            print_account(&view, json)
        }
        AccountCommand::UpgradeScope { id, consent } => {
            let id: AccountId = id.parse()?;
            let view = accounts::login(store, &id, true, consent.consent()).await?;
            print_account(&view, json)
        }
        AccountCommand::Doctor { id } => {
            let report = accounts::doctor(store, &id.parse()?).await?;
            if json {
                return print_json(Some("doctor"), &report.details);
            }
            crate::say!("{}", report.summary);
            Ok(())
        }
        AccountCommand::List => list(store, json).await,
        AccountCommand::Show { id } => show(store, &id.parse()?, json).await,
        AccountCommand::Remove { id } => {
            let id: AccountId = id.parse()?;
            let left = accounts::remove(store, &id).await?;
            if json {
                let removed = serde_json::json!({ "removed": id, "keyring_entries_left": left });
                return print_json(None, &removed);
            }
            crate::say!("removed {id}");
            for name in &left {
                crate::say_err!(
                    "warning: the OS keyring could not be reached; its entry for this \
                     account's secret remains (service \"mailbroker\", name {name}): remove it \
                     with your keyring's own tool"
                );
            }
            Ok(())
        }
    }
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

/// `account set`: the account's fallback route, or none; or whether permanent deletions of
/// its mail may run unattended.
async fn set(store: &Store, args: &SetArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    if args.unattended_deletions || args.no_unattended_deletions {
        return set_unattended(store, &id, args.unattended_deletions, json).await;
    }
    let fallback = match (&args.fallback, &args.mail_account, args.no_fallback) {
        (Some(_), Some(name), _) => Some(crate::store::Fallback {
            provider: mailbroker_core::ProviderKind::Applescript,
            settings: serde_json::json!({ "mail_account": name }),
        }),
        (None, None, true) => None,
        _ => {
            return Err(Error::validation(
                "say what to set: --fallback applescript --mail-account NAME, or --no-fallback",
            ));
        }
    };
    let view = accounts::set_fallback(store, &id, fallback).await?;
    if json {
        return print_json(Some("account"), &views::AccountShowJson::from(&view));
    }
    match &view.account.fallback {
        Some(f) => crate::say!(
            "account {id}: when its own route is unavailable, changes go through {} ({})",
            f.provider.as_str(),
            f.settings
        ),
        None => crate::say!("account {id}: its own route only"),
    }
    Ok(())
}

/// Allows (asked at the terminal, since it lets deletions run without one) or stops
/// unattended permanent deletions of the account's mail.
async fn set_unattended(store: &Store, id: &AccountId, allowed: bool, json: bool) -> Result<()> {
    store.account(id).await?;
    if allowed {
        let mut person = Terminal::open("allowing unattended permanent deletions")?;
        person.say(&format!(
            "With this, `mailbroker delete-staged ID --yes` deletes staged mail of account \
             {id} for good with nobody at a terminal, for example from cron."
        ));
        if person.ask("Type allow to go on: ")? != "allow" {
            return Err(Error::confirmation_declined(
                "not confirmed; nothing was changed",
            ));
        }
    }
    store.set_unattended_deletions(id, allowed, "cli").await?;
    let view = accounts::show(store, id).await?;
    if json {
        return print_json(Some("account"), &views::AccountShowJson::from(&view));
    }
    match allowed {
        true => crate::say!("account {id}: permanent deletions may run unattended (--yes)"),
        false => crate::say!("account {id}: permanent deletions ask at a terminal"),
    }
    Ok(())
}

async fn list(store: &Store, json: bool) -> Result<()> {
    let list = accounts::list(store).await?;
    if json {
        let list: Vec<_> = list.iter().map(views::AccountJson::from).collect();
        return print_json(Some("accounts"), &list);
    }
    for a in &list {
        crate::say!(
            "{}\t{}\t{}\tlast sync: {}",
            a.id,
            a.provider.as_str(),
            a.email.as_deref().unwrap_or("-"),
            a.last_sync_at.map_or("never".into(), rfc3339)
        );
    }
    Ok(())
}

async fn show(store: &Store, id: &AccountId, json: bool) -> Result<()> {
    let view = accounts::show(store, id).await?;
    if json {
        return print_json(Some("account"), &views::AccountShowJson::from(&view));
    }
    crate::say!(
        "{} ({}; {})",
        view.account.id,
        view.account.provider.as_str(),
        match view.secret_store {
            Some("keyring") => "secret in the OS keyring",
            Some(_) => "secret in the index",
            None => "no secret kept by mailbroker",
        }
    );
    if let Some(since) = view.account.unattended_deletions_since {
        crate::say!(
            "permanent deletions may run unattended (delete-staged --yes), since {}",
            rfc3339(since)
        );
    }
    crate::say!(
        "extensions: {}",
        view.account.capabilities.extensions.join(" ")
    );
    for m in &view.mailboxes {
        let source = match m.role_source {
            Some(mailbroker_core::RoleSource::Name) => ", guessed from its name",
            _ => "",
        };
        let role = m
            .role
            .map_or(String::new(), |r| format!(" [{}{source}]", r.as_str()));
        crate::say!(
            "  {}{}: {} messages, {} unread",
            m.name,
            role,
            m.messages,
            m.unread
        );
    }
    Ok(())
}
