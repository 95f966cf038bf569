//! `mailbroker serve …`: the long-running process, and `serve status`.

use std::time::Duration;

use clap::{Args, Subcommand};
use mailbroker_core::{Error, Result};

use super::{ServeOptions, run};
use crate::approvals::Approvals;
use crate::console::ConsoleAt;
use crate::freshness;
use crate::home::Home;
use crate::mcp::McpOptions;
use crate::mcp::command::ApprovalsFlag;
use crate::mcp::command::HttpControls;
use crate::mcp::http::HttpOptions;
use crate::mcp::sessions::SessionLimits;
use crate::oauth::{DocumentPolicy, OAuthOptions, Registration};
use crate::output::print_json;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Serve Streamable HTTP at /mcp on PORT or IP:PORT (a bare port binds 127.0.0.1).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    pub http: String,
    #[command(flatten)]
    pub controls: HttpControls,
    /// Seconds between syncs of every mailbox of every account (incremental; IDLE keeps
    /// INBOX fresh in between).
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: u64,
    /// Seconds between polls of accounts whose server cannot announce changes (Gmail's
    /// history, Graph's delta links, IMAP without IDLE).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub poll: u64,
    /// Seconds another `serve` of the same index waits for this one's heartbeat before it
    /// takes its accounts over (this one beats every third of it).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub takeover: u64,
    /// First syncs (of accounts never synced) the `serve` processes of this index run at
    /// once, over all of them; the others wait in line. A first sync spends a provider's
    /// quota most (Gmail: about two at once fill a project's minute). Give every process the
    /// same number.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub first_syncs: u32,
    /// Messages per account the assistant may change without the user's confirmation within
    /// --confirm-window, over all its calls (a call that would go over asks).
    #[arg(long, value_name = "N", default_value_t = crate::change::DEFAULT_CONFIRM_ABOVE)]
    pub confirm_above: u64,
    /// The window of --confirm-above, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = crate::change::DEFAULT_BUDGET_WINDOW_SECS)]
    pub confirm_window: i64,
    /// Who approves an assistant's writes: `passkey` makes a passkey in the console the only
    /// way (no `mailbroker approve`, no client answering its own question).
    #[arg(long, value_enum, default_value_t = ApprovalsFlag::Person)]
    pub approvals: ApprovalsFlag,
    /// The person's console is at http://localhost:PORT/console on the listener's port; behind
    /// a TLS-terminating proxy, the origin browsers and hosted assistants use
    /// (https://mail.example.org), which is also the OAuth issuer.
    #[arg(
        long = "public-url",
        visible_alias = "console-origin",
        value_name = "URL"
    )]
    pub console_origin: Option<String>,
    /// How hosted MCP clients may make themselves known for OAuth: by a client id metadata
    /// document, by Dynamic Client Registration, both, or not at all (bearer tokens only).
    #[arg(long, value_enum, default_value_t = Registration::Both)]
    pub oauth_registration: Registration,
    /// An https origin whose client documents are fetched though it is at a private or
    /// loopback address (a client on your own network).
    #[arg(long, value_name = "ORIGIN")]
    pub oauth_trust_document_origin: Vec<String>,
    /// A CA (PEM) trusted for those origins' documents.
    #[arg(long, value_name = "PEM", requires = "oauth_trust_document_origin")]
    pub oauth_document_ca: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// Whether a serve process runs for this home, and how fresh each account is.
    Status,
}

pub async fn serve(home: &Home, store: &Store, args: ServeArgs, json: bool) -> Result<()> {
    if let Some(ServeCommand::Status) = args.command {
        return show_status(home, store, json).await;
    }
    let fits = super::limits::check(store).await?;
    let approvals = Approvals::of(store, args.approvals == ApprovalsFlag::Passkey).await?;
    let options = ServeOptions {
        http: HttpOptions {
            addr: args.http,
            allow_remote: args.controls.http_allow_remote,
            token_file: args.controls.http_token_file,
            mcp: McpOptions {
                allow_writes: args.controls.http_allow_writes,
                confirm_above: args.confirm_above,
                confirm_window: args.confirm_window,
                approvals,
                attachments: args.controls.attachments_dir.clone(),
                ..McpOptions::default()
            },
            sessions: SessionLimits::default(),
            console: match args.console_origin {
                Some(url) => ConsoleAt::Origin(url),
                None => ConsoleAt::Listener,
            },
            oauth: OAuthOptions {
                registration: args.oauth_registration,
                documents: DocumentPolicy {
                    trusted_origins: args.oauth_trust_document_origin,
                    ca_pem: match &args.oauth_document_ca {
                        Some(path) => Some(std::fs::read(path).map_err(|e| {
                            Error::validation(format!("cannot read {}: {e}", path.display()))
                        })?),
                        None => None,
                    },
                },
            },
        },
        interval: Duration::from_secs(args.interval),
        poll: Duration::from_secs(args.poll),
        takeover: Duration::from_secs(args.takeover),
        first_syncs: args.first_syncs,
        watches: fits,
    };
    run(home.clone(), store.clone(), options).await
}

async fn show_status(home: &Home, store: &Store, json: bool) -> Result<()> {
    let Some(status) = freshness::read(store).await? else {
        return Err(Error::not_found(format!(
            "no serve process runs on the index of {}",
            home.root().display()
        ))
        .with_next_step("run: mailbroker serve"));
    };
    if json {
        return print_json(Some("serve"), &status);
    }
    for node in &status.nodes {
        crate::say!(
            "serve pid {} on {} at {}: {}",
            node.pid,
            node.host,
            node.url,
            match node.accounts.is_empty() {
                true => "no account of its own yet".to_string(),
                false => node.accounts.join(", "),
            }
        );
    }
    crate::output::print_freshness(&status.accounts);
    Ok(())
}
