//! `mailbroker mcp …`: serving MCP, listing running listeners, printing client configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::http::{self, HttpOptions};
use super::sessions::SessionLimits;
use super::{McpOptions, serve_stdio};
use crate::home::Home;
use crate::output::print_json;
use crate::store::Store;
use mailbroker_core::{Error, Result};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// Serve Streamable HTTP at /mcp on PORT or IP:PORT (a bare port binds 127.0.0.1)
    /// instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    #[command(flatten)]
    pub controls: HttpControls,
    /// Messages per account the assistant may change without the user's confirmation within
    /// --confirm-window, over all its calls (a call that would go over asks).
    #[arg(long, value_name = "N", default_value_t = crate::change::DEFAULT_CONFIRM_ABOVE)]
    pub confirm_above: u64,
    /// The window of --confirm-above, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = crate::change::DEFAULT_BUDGET_WINDOW_SECS)]
    pub confirm_window: i64,
    /// Let a dry run's confirm_token run the write by itself, for clients that cannot ask
    /// the user: the assistant can then approve its own writes. Without it the person
    /// approves each token with `mailbroker approve TOKEN`.
    #[arg(long, conflicts_with = "approvals")]
    pub confirm_with_token: bool,
    /// Who approves an assistant's writes: `passkey` makes a passkey in the console the only
    /// way (no `mailbroker approve`, no client answering its own question).
    #[arg(long, value_enum, default_value_t = ApprovalsFlag::Person)]
    pub approvals: ApprovalsFlag,
}

/// `--approvals`: the default (a person at a terminal, in the console, or the client's own
/// user), or a passkey in the console only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApprovalsFlag {
    Person,
    Passkey,
}

/// The controls of an MCP HTTP listener, the same for `mcp --http` and `serve`.
#[derive(Debug, Args)]
pub struct HttpControls {
    /// Offer the write tools over HTTP (stdio always offers them).
    #[arg(long)]
    pub http_allow_writes: bool,
    /// Allow binding an address other machines can reach.
    #[arg(long)]
    pub http_allow_remote: bool,
    /// Read the bearer token from this file (else $MAILBROKER_MCP_TOKEN, else a generated
    /// token in the home).
    #[arg(long, value_name = "FILE")]
    pub http_token_file: Option<PathBuf>,
    /// The directory save_attachments writes into (an existing one); without it, the tool
    /// says how to set it.
    #[arg(long, value_name = "DIR", env = "MAILBROKER_ATTACHMENTS_DIR")]
    pub attachments_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List running HTTP listeners (url, pid, where the token is kept; never the token) and,
    /// for `serve`'s, each account's freshness.
    Status,
    /// Show, set (DIR, an existing directory) or clear (--none) the home's directory that
    /// save_attachments writes into when the server is given no --attachments-dir.
    AttachmentsDir {
        dir: Option<PathBuf>,
        /// Clear it: save_attachments then refuses until one is set.
        #[arg(long, conflicts_with = "dir")]
        none: bool,
    },
    /// Print configuration for Claude Desktop / Claude Code, for stdio and for HTTP.
    Config {
        /// The HTTP address the snippet should point at.
        #[arg(long, default_value = "127.0.0.1:8765")]
        http: String,
    },
}

pub async fn run(home: &Home, store: &Store, args: McpArgs, json: bool) -> Result<()> {
    match args.command {
        Some(McpCommand::Status) => status(home, store, json).await,
        Some(McpCommand::Config { http }) => config(home, &http, json),
        Some(McpCommand::AttachmentsDir { dir, none }) => {
            attachments_dir(store, dir.as_deref(), none, json).await
        }
        None => {
            let passkey = args.approvals == ApprovalsFlag::Passkey;
            let approvals = crate::approvals::Approvals::of(store, passkey).await?;
            let mcp = McpOptions {
                allow_writes: args.http.is_none() || args.controls.http_allow_writes,
                confirm_above: args.confirm_above,
                confirm_window: args.confirm_window,
                // Where only a passkey approves, a token alone never runs a write.
                confirm_with_token: args.confirm_with_token && !approvals.passkey_only(),
                approvals,
                console: crate::approvals::Approvals::console(store).await?,
                attachments: args.controls.attachments_dir.clone(),
                ..McpOptions::default()
            };
            match args.http {
                None => serve_stdio(home.clone(), store.clone(), mcp).await,
                Some(addr) => {
                    let options = HttpOptions {
                        addr,
                        allow_remote: args.controls.http_allow_remote,
                        token_file: args.controls.http_token_file,
                        mcp,
                        sessions: SessionLimits::default(),
                        console: crate::console::ConsoleAt::Off,
                        oauth: Default::default(),
                    };
                    http::serve(home.clone(), store.clone(), options).await
                }
            }
        }
    }
}

/// A running listener, with each account's freshness when it is `serve`'s.
#[derive(serde::Serialize)]
struct ListenerStatus {
    #[serde(flatten)]
    listener: http::Listener,
    #[serde(skip_serializing_if = "Option::is_none")]
    accounts: Option<BTreeMap<String, crate::freshness::Watching>>,
}

async fn status(home: &Home, store: &Store, json: bool) -> Result<()> {
    let serve = crate::freshness::read(store).await?;
    let listeners: Vec<ListenerStatus> = http::listeners(home)?
        .into_iter()
        .map(|listener| ListenerStatus {
            accounts: serve
                .as_ref()
                .filter(|s| s.pid == listener.pid)
                .map(|s| s.accounts.clone()),
            listener,
        })
        .collect();
    if json {
        return print_json(Some("listeners"), &listeners);
    }
    if listeners.is_empty() {
        crate::say!(
            "no MCP HTTP listener is running for {}",
            home.root().display()
        );
    }
    for ListenerStatus {
        listener: l,
        accounts,
    } in &listeners
    {
        crate::say!(
            "{}  pid {}  token: {}  writes: {}",
            l.url,
            l.pid,
            l.token_source,
            if l.writes { "allowed" } else { "disabled" }
        );
        if let Some(accounts) = accounts {
            crate::output::print_freshness(accounts);
        }
    }
    Ok(())
}

async fn attachments_dir(store: &Store, dir: Option<&Path>, none: bool, json: bool) -> Result<()> {
    let now = match (dir, none) {
        (None, false) => super::attachments::home_directory(store).await?,
        (dir, _) => super::attachments::set_directory(store, dir).await?,
    };
    if json {
        return print_json(Some("attachments_dir"), &now);
    }
    match now {
        Some(dir) => crate::say!("save_attachments writes into {}", dir.display()),
        None => crate::say!(
            "no attachments directory is set: save_attachments refuses unless the server \
             is given --attachments-dir"
        ),
    }
    Ok(())
}

fn config(home: &Home, http: &str, json: bool) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find this program's path: {e}")))?;
    let home_dir = home.root().display().to_string();
    let stdio = serde_json::json!({
        "mcpServers": { "mailbroker": {
            "command": exe.display().to_string(),
            "args": ["mcp"],
            "env": { "MAILBROKER_HOME": home_dir },
        }}
    });
    let addr = http::bind_addr(http, true)?;
    let http_config = serde_json::json!({
        "mcpServers": { "mailbroker": {
            "type": "http",
            "url": format!("http://{addr}/mcp"),
            "headers": { "Authorization": format!("Bearer ${{{}}}", http::TOKEN_ENV) },
        }}
    });
    // `serve` answers on the same HTTP endpoint, with every account kept fresh behind it.
    let serve = serde_json::json!({
        "start": [exe.display().to_string(), "serve", "--http", addr.to_string()],
        "client": http_config,
    });
    if json {
        return print_json(
            Some("config"),
            &serde_json::json!({ "stdio": stdio, "http": http_config, "serve": serve }),
        );
    }
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    println!("# Claude Desktop (claude_desktop_config.json) or Claude Code (.mcp.json), stdio:");
    println!("{}", pretty(&stdio));
    println!();
    println!(
        "# Claude Code (.mcp.json), HTTP: start `mailbroker mcp --http {addr}` and export {} with the token from `mailbroker mcp status`'s token file:",
        http::TOKEN_ENV
    );
    println!("{}", pretty(&http_config));
    println!();
    println!(
        "# Or keep every account fresh as well: run `{} serve --http {addr}` (docs/mailbroker-serve.service runs it as a systemd user unit); clients use the HTTP entry above.",
        exe.display()
    );
    Ok(())
}
