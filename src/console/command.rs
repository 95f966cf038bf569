//! `mailbroker console`: the console for a person who runs no `serve`, on loopback, and
//! `console link`: a new single-use sign-in link for a console already running.

use clap::{Args, Subcommand};
use mailbroker_core::{Error, Result};

use super::{Console, LINK_SECS, Origin, router};
use crate::output::print_json;
use crate::store::{LinkPurpose, Store};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConsoleArgs {
    #[command(subcommand)]
    command: Option<ConsoleCommand>,
    /// Where to listen: a port, or a loopback address and port (never another address).
    #[arg(long, value_name = "[127.0.0.1:]PORT", default_value = "8766")]
    listen: String,
}

#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Print a new single-use sign-in link (valid five minutes) for the console at ORIGIN.
    Link {
        /// The console's origin as the browser reaches it (`http://127.0.0.1:8766`, or
        /// `serve`'s `--console-origin`).
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8766")]
        origin: String,
    },
}

pub async fn run(store: &Store, args: ConsoleArgs, json: bool) -> Result<()> {
    match args.command {
        Some(ConsoleCommand::Link { origin }) => {
            let origin = Origin::parse(&origin)?;
            let link = new_link(store, &origin).await?;
            match json {
                true => print_json(
                    None,
                    &serde_json::json!({ "link": link, "expires_in": LINK_SECS }),
                ),
                false => {
                    crate::say!("{link}");
                    Ok(())
                }
            }
        }
        None => serve(store, &args.listen, json).await,
    }
}

async fn new_link(store: &Store, origin: &Origin) -> Result<String> {
    let secret = store
        .issue_console_link(LinkPurpose::SignIn, LINK_SECS)
        .await?;
    Ok(origin.sign_in_link(&secret))
}

/// Serves the console on loopback until SIGINT/SIGTERM, after printing where and a link.
async fn serve(store: &Store, listen: &str, json: bool) -> Result<()> {
    let addr = crate::mcp::http::bind_addr(listen, false)?;
    if !addr.ip().is_loopback() {
        return Err(Error::validation(format!(
            "{addr}: `mailbroker console` listens on loopback only"
        ))
        .with_next_step("serve the console from `mailbroker serve` behind a TLS proxy instead"));
    }
    let (listener, local) = crate::mcp::http::listen(addr).await?;
    let origin = Origin::parse(&format!("http://{local}"))?;
    let link = new_link(store, &origin).await?;
    match json {
        true => print_json(
            None,
            &serde_json::json!({ "url": format!("{}/console", origin.url), "link": link }),
        )?,
        false => {
            crate::say!(
                "mailbroker console at {}/console; open this link once, within five minutes:",
                origin.url
            );
            crate::say!("{link}");
        }
    }
    let app = router(Console {
        store: store.clone(),
        origin,
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::mcp::http::signalled())
        .await
        .map_err(|e| Error::internal(format!("the console's server failed: {e}")))
}
