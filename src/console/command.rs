//! `mailbroker console`: the console for a person who runs no `serve`, on loopback, and
//! `console link`: a new single-use sign-in link for a console already running.

use clap::{Args, Subcommand};
use mailbroker_core::{Error, Result};

use super::{Console, LINK_SECS, Origin, router};
use crate::home::Home;
use crate::output::{Terminal, print_json, rfc3339};
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
        /// The console's origin as the browser reaches it (`http://localhost:8766`).
        #[arg(long, value_name = "URL", default_value = "http://localhost:8766")]
        origin: String,
    },
    /// Enroll a passkey: prints, at the terminal only, a single-use link (five minutes)
    /// where your browser makes one. Every decision taken in the console needs it.
    Enroll {
        /// The console's origin as the browser reaches it (`http://localhost:8766`).
        #[arg(long, value_name = "URL", default_value = "http://localhost:8766")]
        origin: String,
    },
    /// Who approves assistants' writes for this whole home: `passkey` (a passkey in the
    /// console only) or `person` (also a terminal, and a client's own user); asked at a
    /// terminal. Without a value, shows it.
    Approvals {
        #[arg(value_enum)]
        who: Option<crate::mcp::command::ApprovalsFlag>,
        /// The console's origin, named in what a refusal says to do next.
        #[arg(long, value_name = "URL", default_value = crate::approvals::DEFAULT_CONSOLE)]
        origin: String,
    },
    /// List the enrolled passkeys, or remove one.
    Passkeys {
        /// Remove passkey ID: from then on it decides nothing.
        #[arg(long, value_name = "ID")]
        remove: Option<i64>,
    },
}

pub async fn run(home: &Home, store: &Store, args: ConsoleArgs, json: bool) -> Result<()> {
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
        Some(ConsoleCommand::Enroll { origin }) => {
            enroll(store, &Origin::parse(&origin)?, json).await
        }
        Some(ConsoleCommand::Passkeys { remove }) => passkeys(store, remove, json).await,
        Some(ConsoleCommand::Approvals { who, origin }) => {
            approvals(store, who, &Origin::parse(&origin)?, json).await
        }
        None => serve(home, store, &args.listen, json).await,
    }
}

async fn new_link(store: &Store, origin: &Origin) -> Result<String> {
    let secret = store
        .issue_console_link(LinkPurpose::SignIn, LINK_SECS)
        .await?;
    Ok(origin.sign_in_link(&secret))
}

/// Shows an enrollment link at the controlling terminal, and only there: a program without
/// one (an assistant's shell) is refused before a link exists.
async fn enroll(store: &Store, origin: &Origin, json: bool) -> Result<()> {
    let mut person = Terminal::open("enrolling a passkey for the console")?;
    let secret = store
        .issue_console_link(LinkPurpose::Enroll, LINK_SECS)
        .await?;
    let link = format!("{}/console/enroll?key={secret}", origin.url);
    person.say("Open this link once, within five minutes, and create the passkey there:");
    person.say(&link);
    match json {
        true => print_json(
            None,
            &serde_json::json!({ "enroll": link, "expires_in": LINK_SECS }),
        ),
        false => Ok(()),
    }
}

/// Shows, or sets at a terminal, who approves for the whole home.
async fn approvals(
    store: &Store,
    who: Option<crate::mcp::command::ApprovalsFlag>,
    origin: &Origin,
    json: bool,
) -> Result<()> {
    use crate::approvals::Approvals;
    use crate::mcp::command::ApprovalsFlag;
    if let Some(who) = who {
        let passkey = who == ApprovalsFlag::Passkey;
        if let (false, Approvals::Passkey { console }) =
            (passkey, Approvals::of(store, false).await?)
        {
            // A terminal is what a program with a shell can fake: only the passkey loosens.
            return Err(Error::confirmation_required(
                "only a passkey in the console lets terminals approve again; nothing was changed",
            )
            .with_next_step(format!(
                "open {console}/console/accounts and choose it there, with your passkey"
            )));
        }
        let mut person = Terminal::open("changing who approves assistants' writes")?;
        if passkey && store.passkeys().await?.is_empty() {
            return Err(
                Error::validation("no passkey is enrolled yet: nobody could approve")
                    .with_next_step("enroll one first: mailbroker console enroll"),
            );
        }
        if person.ask("Type yes to change who approves: ")? != "yes" {
            return Err(Error::confirmation_declined(
                "not confirmed; nothing was changed",
            ));
        }
        Approvals::set(store, passkey, &origin.url).await?;
    }
    let now = Approvals::of(store, false).await?;
    let (who, console) = match &now {
        Approvals::Person => ("person", None),
        Approvals::Passkey { console } => ("passkey", Some(console.as_str())),
    };
    match json {
        true => print_json(
            None,
            &serde_json::json!({ "approvals": who, "console": console }),
        ),
        false => {
            match console {
                Some(c) => crate::say!("only a passkey in the console approves ({c}/console)"),
                None => crate::say!(
                    "a person approves at a terminal, in the console, or in their assistant's client"
                ),
            }
            Ok(())
        }
    }
}

async fn passkeys(store: &Store, remove: Option<i64>, json: bool) -> Result<()> {
    if let Some(id) = remove {
        // A program that removed every passkey would leave nobody to approve.
        Terminal::open("removing a passkey")?;
        store.remove_passkey(id).await?;
        return match json {
            true => print_json(None, &serde_json::json!({ "removed": id })),
            false => {
                crate::say!("passkey {id} removed");
                Ok(())
            }
        };
    }
    let keys = store.passkeys().await?;
    if json {
        let list: Vec<_> = (keys.iter())
            .map(|k| serde_json::json!({ "id": k.id, "name": k.name, "created_at": k.created_at, "last_used_at": k.last_used_at }))
            .collect();
        return print_json(Some("passkeys"), &list);
    }
    if keys.is_empty() {
        crate::say!("no passkeys; enroll one: mailbroker console enroll");
    }
    for k in &keys {
        let used = k.last_used_at.map_or("never used".to_string(), |t| {
            format!("last used {}", rfc3339(t))
        });
        crate::say!(
            "{}\t{}\tenrolled {}\t{used}",
            k.id,
            crate::output::one_line(&k.name),
            rfc3339(k.created_at)
        );
    }
    Ok(())
}

/// Serves the console on loopback until SIGINT/SIGTERM, after printing where and a link.
async fn serve(home: &Home, store: &Store, listen: &str, json: bool) -> Result<()> {
    let addr = crate::mcp::http::bind_addr(listen, false)?;
    if !addr.ip().is_loopback() {
        return Err(Error::validation(format!(
            "{addr}: `mailbroker console` listens on loopback only"
        ))
        .with_next_step("serve the console from `mailbroker serve` behind a TLS proxy instead"));
    }
    let (listener, local) = crate::mcp::http::listen(addr).await?;
    // WebAuthn takes a domain, not an address: the browser is sent to `localhost`.
    let origin = Origin::parse(&format!("http://localhost:{}", local.port()))?;
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
    let work = tokio_util::task::TaskTracker::new();
    let app = router(Console {
        home: home.clone(),
        store: store.clone(),
        origin,
        work: work.clone(),
        running: Default::default(),
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(crate::mcp::http::signalled())
        .await
        .map_err(|e| Error::internal(format!("the console's server failed: {e}")));
    // A change a person started runs to its end, journaled, before the process exits.
    work.close();
    work.wait().await;
    served
}
