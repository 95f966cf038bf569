//! The command line: typed arguments in, a service call, one output function out. No mail
//! logic lives here.

use std::io::BufRead;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use mailbroker_core::{AccountId, Error, Result};
use mailbroker_imap::{ImapConfig, TlsMode};

use crate::home::Home;
use crate::output::{self, print_json};
use crate::store::{MessageRow, Store};
use crate::{accounts, search};

mod approve;
mod args;
mod delete;
mod sync;

pub use args::parse_args;
mod update;
mod views;

#[derive(Debug, Parser)]
#[command(
    name = "mailbroker",
    version,
    about = "Change mail on the server, safely: a local index, verified writes, undo."
)]
pub struct Cli {
    /// Home directory (index, locks). Default: $MAILBROKER_HOME, else $XDG_DATA_HOME/mailbroker.
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Print machine-readable JSON on stdout (field names are stable; see README).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add, list, show or remove accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Bring the local index up to date with the server (incremental unless --full).
    Sync {
        /// Only this account (default: every account).
        #[arg(long)]
        account: Option<String>,
        /// Refetch every message instead of only what changed.
        #[arg(long)]
        full: bool,
    },
    /// Search the local index (e.g. `from:alice is:unread tag:invoice "exact phrase"`).
    Search {
        /// Query terms; see README for the language. `-term` negates a term.
        #[arg(required = true, allow_hyphen_values = true, trailing_var_arg = true)]
        query: Vec<String>,
        /// Most messages to return.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one indexed message by its id; with --body, its text as read from the server.
    Show {
        id: i64,
        /// Also read the message's text from the server (HTML converted to text).
        #[arg(long)]
        body: bool,
        /// Most body characters to print.
        #[arg(long, default_value_t = 4000)]
        max_chars: usize,
        /// Body character to start at.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Stage messages for deletion (a manifest); nothing is deleted until delete-staged.
    StageDelete(delete::StageArgs),
    /// List, show, cancel or run staged deletions.
    DeleteStaged(delete::DeleteStagedArgs),
    /// Serve the MCP tools to an assistant (stdio, or Streamable HTTP with --http).
    Mcp(crate::mcp::command::McpArgs),
    /// Change messages on the server (patch semantics: only what you ask changes).
    Update(UpdateArgs),
    /// Undo a change (only messages still as that change left them).
    Undo {
        change: i64,
        /// Print the plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Confirm an undo that needs it (a move to junk or trash, or more than 25
        /// messages) without being asked; needed when not on a terminal.
        #[arg(long)]
        yes: bool,
    },
    /// Approve a write an assistant asked to make (the confirm_token its dry run showed).
    Approve {
        token: String,
        /// Approve without being asked (needed when not on a terminal).
        #[arg(long)]
        yes: bool,
    },
    /// List the change journal, or show one change with its messages.
    Changes {
        id: Option<i64>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// Message ids (from `search`).
    #[arg(required_unless_present = "query", conflicts_with = "query")]
    pub ids: Vec<i64>,
    /// Select messages by a search query instead of ids.
    #[arg(long, allow_hyphen_values = true)]
    pub query: Option<String>,
    #[arg(long, conflicts_with = "unread")]
    pub read: bool,
    #[arg(long)]
    pub unread: bool,
    #[arg(long, conflicts_with = "unflag")]
    pub flag: bool,
    #[arg(long)]
    pub unflag: bool,
    /// Add a tag (IMAP keyword); repeatable.
    #[arg(long = "add-tag", value_name = "TAG")]
    pub add_tag: Vec<String>,
    /// Remove a tag; repeatable.
    #[arg(long = "remove-tag", value_name = "TAG")]
    pub remove_tag: Vec<String>,
    /// Move to a mailbox name or a role (inbox, archive, junk, trash).
    #[arg(long, value_name = "MAILBOX")]
    pub move_to: Option<String>,
    /// Print the plan and change nothing, on the server or locally.
    #[arg(long)]
    pub dry_run: bool,
    /// Stage the messages for deletion instead (`trash` or `permanent`); see delete-staged.
    #[arg(long, value_name = "MODE", value_parser = ["trash", "permanent"])]
    pub delete: Option<String>,
    /// Confirm a write that needs it (a move to junk or trash, or more than 25 messages)
    /// without being asked; needed when not on a terminal. The connection then opens while
    /// the messages are read and planned.
    #[arg(long)]
    pub yes: bool,
}

impl UpdateArgs {
    fn patch(&self) -> mailbroker_core::Patch {
        let pick = |yes: bool, no: bool| match (yes, no) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        mailbroker_core::Patch {
            read: pick(self.read, self.unread),
            flagged: pick(self.flag, self.unflag),
            add_tags: self.add_tag.clone(),
            remove_tags: self.remove_tag.clone(),
            move_to: self.move_to.clone(),
            delete: self.delete.as_deref().map(|m| match m {
                "permanent" => mailbroker_core::DeleteMode::Permanent,
                _ => mailbroker_core::DeleteMode::Trash,
            }),
        }
    }
}

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
}

impl ConsentArgs {
    fn consent(&self) -> mailbroker_core::Consent {
        mailbroker_core::Consent {
            open_browser: !self.no_browser,
            paste: self.no_browser,
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

/// Runs one command to completion; returns the exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    let started = std::time::Instant::now();
    let home = Home::resolve(cli.home.as_deref())?;
    let store = Store::open(&home.database()).await?;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "index opened");
    let outcome = dispatch(&home, &store, cli.command, cli.json).await;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "command done");
    store.close().await;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "index closed");
    outcome
}

async fn dispatch(home: &Home, store: &Store, command: Command, json: bool) -> Result<u8> {
    let done = match command {
        Command::Update(args) => return update::update(home, store, &args, json).await,
        Command::Undo {
            change,
            dry_run,
            yes,
        } => return update::undo(home, store, change, (dry_run, yes), json).await,
        Command::Account(cmd) => account(store, cmd, json).await,
        Command::Sync { account, full } => {
            return sync::run(home, store, account, full, json).await;
        }
        Command::Search { query, limit } => search_messages(store, &query, limit, json).await,
        Command::Changes { id, limit } => changes(store, id, limit, json).await,
        Command::Approve { token, yes } => approve::approve(store, &token, yes, json).await,
        Command::Show {
            id,
            body,
            max_chars,
            offset,
        } => match body {
            false => show(store, id, json).await,
            true => show_body(store, id, (offset, max_chars), json).await,
        },
        Command::StageDelete(args) => delete::stage(store, args, json).await,
        Command::DeleteStaged(args) => return delete::delete_staged(home, store, args, json).await,
        Command::Mcp(args) => crate::mcp::command::run(home, store, args, json).await,
    };
    done.map(|()| 0)
}

/// A `--limit` within `1..=max`, or a validation error naming the option.
fn limit_in(limit: u32, max: u32) -> Result<u32> {
    if (1..=max).contains(&limit) {
        return Ok(limit);
    }
    Err(
        Error::validation(format!("--limit {limit} is out of range: give 1 to {max}"))
            .with_next_step("narrow the query instead of asking for more"),
    )
}

async fn search_messages(store: &Store, words: &[String], limit: u32, json: bool) -> Result<()> {
    let limit = limit_in(limit, 100_000)?;
    let text = words.join(" ");
    let query = search::parse(&text, crate::store::now_secs())?;
    let crate::store::SearchPage { rows, total } = store.search_page(&query, limit, 0).await?;
    if json {
        return print_json(
            None,
            &serde_json::json!({ "messages": views::messages(&rows), "total": total }),
        );
    }
    if rows.is_empty() {
        eprintln!("no messages match {}", output::one_line(&text));
        return Ok(());
    }
    rows.iter().for_each(|r| println!("{}", one_line(r)));
    if (rows.len() as u64) < total {
        eprintln!("{} of {total} shown; --limit N shows more", rows.len());
    }
    Ok(())
}

async fn changes(store: &Store, id: Option<i64>, limit: u32, json: bool) -> Result<()> {
    let limit = limit_in(limit, 10_000)?;
    let Some(id) = id else {
        let list = store.changes(limit).await?;
        if json {
            let list: Vec<_> = list.iter().map(views::ChangeJson::from).collect();
            return print_json(Some("changes"), &list);
        }
        list.iter().for_each(print_change_record);
        return Ok(());
    };
    let change = store.change(id).await?;
    if json {
        return print_json(Some("change"), &views::ChangeJson::from(&change));
    }
    print_change_record(&change);
    for item in &change.items {
        let error = item
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(" ({e})"));
        println!(
            "  message {}: {}{error}",
            item.message_id,
            item.outcome.as_str()
        );
    }
    Ok(())
}

async fn show(store: &Store, id: i64, json: bool) -> Result<()> {
    let row = store.message(id).await?;
    if json {
        return print_json(Some("message"), &views::MessageJson::from(&row));
    }
    print_message(&row);
    Ok(())
}

async fn show_body(
    store: &Store,
    id: i64,
    (offset, max_chars): (usize, usize),
    json: bool,
) -> Result<()> {
    let read = crate::read::read_messages(store, &[id]).await?;
    let Some((row, text)) = read.into_iter().next() else {
        return Err(Error::not_found(format!("no message with id {id}")));
    };
    let (body, total, has_more) = crate::read::window(&text.body, offset, max_chars);
    if json {
        return print_json(
            Some("message"),
            &serde_json::json!({
                "message": views::MessageJson::from(&row), "attachments": text.attachments, "body": body,
                "offset": offset, "body_chars": total, "has_more": has_more,
            }),
        );
    }
    print_message(&row);
    for a in &text.attachments {
        println!(
            "attachment: {} ({}, {} bytes)",
            output::one_line(a.name.as_deref().unwrap_or("(unnamed)")),
            output::one_line(&a.content_type),
            a.size
        );
    }
    println!();
    println!("{}", output::body_text(&body));
    if has_more {
        println!(
            "[… {} more characters: --offset {}]",
            total - offset - body.chars().count(),
            offset + max_chars
        );
    }
    Ok(())
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
    println!(
        "account {} ready ({} mailboxes; capabilities: {})",
        view.account.id,
        view.mailboxes.len(),
        view.account.capabilities.extensions.join(" ")
    );
    println!("next: mailbroker sync --account {}", view.account.id);
    Ok(())
}

async fn account(store: &Store, cmd: AccountCommand, json: bool) -> Result<()> {
    match cmd {
        AccountCommand::Add(AddCommand::Imap(args)) => {
            let id: AccountId = args.id.parse()?;
            let config = imap_config(&args)?;
            config.check_plaintext()?;
            if config.tls == TlsMode::None && args.allow_plaintext {
                eprintln!(
                    "warning: --tls none with --allow-plaintext: the password goes to {} in \
                     clear text, readable by anyone on the network path",
                    config.host
                );
            }
            accounts::check_new(store, &id).await?;
            let new = mailbroker_imap::setup(&config, args.email.clone()).await?;
            print_account(&accounts::add(store, id, new).await?, json)
        }
        AccountCommand::Add(AddCommand::Gmail(args)) => add_gmail(store, &args, json).await,
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
            println!("{}", report.summary);
            Ok(())
        }
        AccountCommand::List => {
            let list = accounts::list(store).await?;
            if json {
                let list: Vec<_> = list.iter().map(views::AccountJson::from).collect();
                return print_json(Some("accounts"), &list);
            }
            for a in &list {
                println!(
                    "{}\t{}\t{}\tlast sync: {}",
                    a.id,
                    a.provider.as_str(),
                    a.email.as_deref().unwrap_or("-"),
                    a.last_sync_at.map_or("never".into(), rfc3339)
                );
            }
            Ok(())
        }
        AccountCommand::Show { id } => {
            let view = accounts::show(store, &id.parse()?).await?;
            if json {
                return print_json(Some("account"), &views::AccountShowJson::from(&view));
            }
            println!(
                "{} ({}; secret in the {})",
                view.account.id,
                view.account.provider.as_str(),
                match view.secret_store {
                    Some("keyring") => "OS keyring",
                    _ => "index",
                }
            );
            println!(
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
                println!(
                    "  {}{}: {} messages, {} unread",
                    m.name, role, m.messages, m.unread
                );
            }
            Ok(())
        }
        AccountCommand::Remove { id } => {
            let id: AccountId = id.parse()?;
            accounts::remove(store, &id).await?;
            if json {
                return print_json(Some("removed"), &id);
            }
            println!("removed {id}");
            Ok(())
        }
    }
}

fn print_change_record(c: &crate::store::ChangeRecord) {
    let unrecorded = if c.status == crate::store::ChangeStatus::Executing {
        "\tresults not recorded (outcome unknown)"
    } else {
        ""
    };
    let undone = c
        .undone_by
        .map(|u| format!("\tundone by change {u}"))
        .unwrap_or_default();
    println!(
        "{}\t{}\t{}\t{}\tapplied {} unchanged {} stale {} failed {}{unrecorded}{undone}",
        c.id,
        rfc3339(c.created_at),
        c.origin,
        c.patch,
        c.applied,
        c.unchanged,
        c.stale,
        c.failed
    );
}

fn rfc3339(secs: i64) -> String {
    mail_parser::DateTime::from_timestamp(secs).to_rfc3339()
}

fn one_line(r: &MessageRow) -> String {
    let mut marks = String::new();
    marks.push(if r.place.read { ' ' } else { 'N' });
    marks.push(if r.place.flagged { '*' } else { ' ' });
    let tags = if r.place.tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", r.place.tags.join(","))
    };
    format!(
        "{:>7} {} {:<10} {:<16} {:<28} {}{}",
        r.place.id,
        marks,
        r.date.as_deref().map_or("", |d| &d[..10.min(d.len())]),
        output::one_line(&r.place.mailbox),
        output::one_line(&r.from)
            .chars()
            .take(28)
            .collect::<String>(),
        output::one_line(&r.subject),
        output::one_line(&tags)
    )
}

fn print_message(r: &MessageRow) {
    use output::one_line as safe;
    println!("id:       {}", r.place.id);
    println!(
        "account:  {}  mailbox: {}  remote id: {}",
        r.place.account,
        safe(&r.place.mailbox),
        safe(r.place.remote_id.as_str())
    );
    println!("date:     {}", r.date.as_deref().unwrap_or("-"));
    println!("from:     {}", safe(&r.from));
    println!("to:       {}", safe(&r.to));
    if !r.cc.is_empty() {
        println!("cc:       {}", safe(&r.cc));
    }
    println!("subject:  {}", safe(&r.subject));
    println!("flags:    {}", safe(&r.flags.join(" ")));
    println!(
        "size:     {} bytes{}",
        r.size,
        if r.has_attachments {
            ", attachments"
        } else {
            ""
        }
    );
    println!();
    println!("{}", safe(&r.snippet));
}
