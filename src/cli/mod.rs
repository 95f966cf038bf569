//! The command line: typed arguments in, a service call, one output function out. No mail
//! logic lives here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use mailbroker_core::{Error, Result};

use crate::home::Home;
use crate::listing::{ChangeRecord, ChangeStatus, Listing, MessageRow, SearchPage};
use crate::output::{self, print_json, rfc3339};
use crate::scope::Scope;
use crate::store::Store;

mod account;
mod add;
mod approve;
mod args;
mod attachments;
mod delete;
mod draft;
mod rule;
mod sync;
mod token;

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
    /// Home directory (the index). Default: $MAILBROKER_HOME, else $XDG_DATA_HOME/mailbroker.
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// A PostgreSQL database that holds the index instead of the home's SQLite file, shared by
    /// every machine given the same URL (a team deployment). The home still holds the rest.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "MAILBROKER_DATABASE_URL",
        hide_env_values = true
    )]
    pub database: Option<String>,
    /// Print machine-readable JSON on stdout (field names are stable; see docs/cli.md).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add, list, show or remove accounts.
    #[command(subcommand)]
    Account(account::AccountCommand),
    /// Bring the local index up to date with the server (incremental unless --full).
    Sync {
        /// Only this account (default: every account); also given as `sync ACCOUNT`.
        #[arg(long)]
        account: Option<String>,
        /// The account, as `--account` gives it.
        #[arg(value_name = "ACCOUNT", conflicts_with = "account")]
        only: Option<String>,
        /// Refetch every message instead of only what changed.
        #[arg(long)]
        full: bool,
    },
    /// Search the local index (e.g. `from:alice is:unread tag:invoice "exact phrase"`).
    Search {
        /// Query terms; see docs/search.md for the language. `-term` negates a term.
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
    /// List a message's attachments, or save them into a directory with --to.
    Attachments(attachments::AttachmentsArgs),
    /// Stage messages for deletion (a manifest); nothing is deleted until delete-staged.
    StageDelete(delete::StageArgs),
    /// List, show, cancel or run staged deletions.
    DeleteStaged(delete::DeleteStagedArgs),
    /// Serve the MCP tools to an assistant (stdio, or Streamable HTTP with --http).
    Mcp(crate::mcp::command::McpArgs),
    /// Run in the background: serve MCP over HTTP and keep every account fresh (IMAP IDLE,
    /// polling elsewhere); `serve status` shows how fresh.
    Serve(crate::serve::command::ServeArgs),
    /// Change messages on the server (patch semantics: only what you ask changes).
    Update(UpdateArgs),
    /// Save a reply (or a new message) in the account's Drafts; mailbroker never sends it.
    Draft(draft::DraftArgs),
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
        /// Has no effect: the person answers at the terminal. Kept so that a script that
        /// passes it is told why it cannot approve.
        #[arg(long, hide = true)]
        yes: bool,
    },
    /// Create, list or revoke bearer tokens that open only some accounts over MCP HTTP.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// The console, a web page where a person reviews what assistants asked for, staged
    /// deletions, the journal and the accounts (loopback); `console link` signs a browser in.
    Console(crate::console::command::ConsoleArgs),
    /// Server-side rules as manifests a person approves: stage, approve, list, remove.
    #[command(subcommand)]
    Rule(rule::RuleCommand),
    /// List the change journal, or show one change with its messages.
    Changes {
        id: Option<i64>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

/// A message id as `search` prints it; anything else is most likely a query typed without
/// `--query`, and the error says so.
fn message_id(s: &str) -> std::result::Result<i64, String> {
    s.parse().map_err(|_| {
        format!("{s:?} is not a message id; to select messages by a query, pass --query {s:?}")
    })
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// Message ids (from `search`).
    #[arg(required_unless_present = "query", conflicts_with = "query", value_parser = message_id)]
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

/// Whether `--database` was given on the command line (not from the environment) with a
/// password in its URL.
fn database_password_in_argv(args: impl Iterator<Item = String>) -> bool {
    let mut args = args.skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--database") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        };
        if value
            .and_then(|v| url::Url::parse(&v).ok())
            .is_some_and(|u| u.password().is_some())
        {
            return true;
        }
    }
    false
}

/// Runs one command to completion; returns the exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    let started = std::time::Instant::now();
    let home = Home::resolve(cli.home.as_deref())?;
    if database_password_in_argv(std::env::args()) {
        crate::say_err!(
            "warning: the database URL on the command line holds a password, which `ps` shows \
             to every user of this machine for as long as this runs; use \
             MAILBROKER_DATABASE_URL, PGPASSWORD or a ~/.pgpass file"
        );
    }
    let store = match (&cli.database, &cli.command) {
        (Some(url), _) => Store::connect(url).await?,
        (None, Command::Search { .. }) => Store::open_reader(&home.database()).await?,
        (None, _) => Store::open(&home.database()).await?,
    };
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
        Command::Draft(args) => return draft::draft(home, store, &args, json).await,
        Command::Undo {
            change,
            dry_run,
            yes,
        } => return update::undo(home, store, change, (dry_run, yes), json).await,
        Command::Account(cmd) => account::account(store, cmd, json).await,
        Command::Sync {
            account,
            only,
            full,
        } => {
            return sync::run(store, account.or(only), full, json).await;
        }
        Command::Search { query, limit } => search_messages(store, &query, limit, json).await,
        Command::Changes { id, limit } => changes(store, id, limit, json).await,
        Command::Approve { token, yes: _ } => approve::approve(store, &token, json).await,
        Command::Token(cmd) => token::token(store, cmd, json).await,
        Command::Console(args) => crate::console::command::run(home, store, args, json).await,
        Command::Show {
            id,
            body,
            max_chars,
            offset,
        } => match body {
            false => show(store, id, json).await,
            true => show_body(store, id, (offset, max_chars), json).await,
        },
        Command::Attachments(args) => attachments::run(store, &args, json).await,
        Command::StageDelete(args) => delete::stage(home, store, args, json).await,
        Command::DeleteStaged(args) => return delete::delete_staged(home, store, args, json).await,
        Command::Rule(cmd) => return rule::rule(home, store, cmd, json).await,
        Command::Mcp(args) => crate::mcp::command::run(home, store, args, json).await,
        Command::Serve(args) => crate::serve::command::serve(home, store, args, json).await,
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

/// The index as the person at the command line lists it: every account.
pub(crate) fn owner(store: &Store) -> Listing<'_> {
    Listing::new(store, &Scope::Owner)
}

async fn search_messages(store: &Store, words: &[String], limit: u32, json: bool) -> Result<()> {
    let limit = limit_in(limit, 100_000)?;
    let text = words.join(" ");
    let SearchPage { rows, total } = owner(store).search(&text, None, limit, 0).await?;
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
        let list = owner(store).changes(limit).await?;
        if json {
            let list: Vec<_> = list.iter().map(views::ChangeJson::from).collect();
            return print_json(Some("changes"), &list);
        }
        list.iter().for_each(print_change_record);
        return Ok(());
    };
    let change = owner(store).change(id).await?;
    if json {
        return print_json(Some("change"), &views::ChangeJson::from(&change));
    }
    print_change_record(&change);
    for item in &change.items {
        let error = item
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(" ({e})"));
        crate::say!(
            "  message {}: {}{error}",
            item.message_id,
            item.outcome.as_str()
        );
    }
    Ok(())
}

async fn show(store: &Store, id: i64, json: bool) -> Result<()> {
    let row = owner(store).message(id).await?;
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
    let read = crate::read::read_messages(store, &[id], &crate::scope::Scope::Owner).await?;
    let Some(read) = read.into_iter().next() else {
        return Err(Error::not_found(format!("no message with id {id}")));
    };
    let (row, text) = read.result?;
    let (body, total, has_more) = crate::read::window(&text.body, offset, max_chars);
    if json {
        return print_json(
            Some("message"),
            &serde_json::json!({
                "message": views::MessageJson::from(&row), "attachments": text.attachments,
                "auth": text.auth, "body": body,
                "offset": offset, "body_chars": total, "has_more": has_more,
            }),
        );
    }
    print_message(&row);
    for a in &text.attachments {
        println!("attachment {}", attachments::line(a));
    }
    if let Some(v) = &text.auth {
        let word = |v: mailbroker_core::Verdict| serde_json::to_value(v).unwrap_or_default();
        println!(
            "authentication (the account's server): spf={} dkim={} dmarc={}",
            word(v.spf).as_str().unwrap_or("none"),
            word(v.dkim).as_str().unwrap_or("none"),
            word(v.dmarc).as_str().unwrap_or("none")
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

fn print_change_record(c: &ChangeRecord) {
    let unrecorded = match c.status {
        ChangeStatus::Executing => {
            "\tnot finished (a message without a recorded result: outcome unknown)"
        }
        ChangeStatus::Interrupted => {
            "\tinterrupted (its process ended first; a sync or a rerun settles what is unknown)"
        }
        ChangeStatus::Done => "",
    };
    let undone = c
        .undone_by
        .map(|u| format!("\tundone by change {u}"))
        .unwrap_or_default();
    let counts: Vec<String> = c
        .tally
        .counts()
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    // The origin names a client as the client named itself: escaped, tabs too.
    crate::say!(
        "{}\t{}\t{}\t{}\t{}{unrecorded}{undone}",
        c.id,
        rfc3339(c.created_at),
        output::one_line(&c.origin),
        output::one_line(&serde_json::to_string(&c.patch).unwrap_or_default()),
        counts.join(" ")
    );
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
