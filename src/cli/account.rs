//! `mailbroker account …`: listing, showing, setting, removing, login and the doctor (adding
//! is `add.rs`).

use clap::{Args, Subcommand};
use mailbroker_core::{AccountId, Error, Result};

use super::{rfc3339, views};
use crate::accounts;
use crate::output::{Terminal, print_json};
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Add an account.
    #[command(subcommand)]
    Add(super::add::AddCommand),
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
    /// Authorize again with the full Gmail scope, which permanent deletion needs, or (with
    /// --rules) the one server-side rules need.
    UpgradeScope {
        id: String,
        /// Ask for what keeping rules on the server needs (Gmail's gmail.settings.basic)
        /// instead of permanent deletion's.
        #[arg(long)]
        rules: bool,
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
    pub(super) fn consent(&self) -> mailbroker_core::Consent {
        mailbroker_core::Consent {
            open_browser: !self.no_browser,
            paste: self.no_browser,
            browser: self.browser,
        }
    }
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
    /// The authserv-id the account's own server stamps in Authentication-Results (repeat for
    /// more): only its verdicts are shown. Gmail's (mx.google.com) is known.
    #[arg(long, value_name = "ID", conflicts_with_all = ["fallback", "no_fallback", "unattended_deletions", "no_unattended_deletions"])]
    pub authserv_id: Vec<String>,
    /// Trust no Authentication-Results but the provider's known one.
    #[arg(long, conflicts_with = "authserv_id")]
    pub no_authserv_id: bool,
}

pub(super) fn print_account(view: &accounts::AccountView, json: bool) -> Result<()> {
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
        AccountCommand::Add(cmd) => super::add::add(store, cmd, json).await,
        AccountCommand::Set(args) => set(store, &args, json).await,
        AccountCommand::Login { id, consent } => {
            let id: AccountId = id.parse()?;
            let upgrade = mailbroker_core::Upgrade::default();
            let view = accounts::login(store, &id, upgrade, consent.consent()).await?;
            print_account(&view, json)
        }
        AccountCommand::UpgradeScope { id, rules, consent } => {
            let id: AccountId = id.parse()?;
            let upgrade = mailbroker_core::Upgrade {
                permanent_delete: !rules,
                rules,
            };
            let view = accounts::login(store, &id, upgrade, consent.consent()).await?;
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

/// `account set`: the account's fallback route, or none; or whether permanent deletions of
/// its mail may run unattended.
async fn set(store: &Store, args: &SetArgs, json: bool) -> Result<()> {
    let id: AccountId = args.id.parse()?;
    if !args.authserv_id.is_empty() || args.no_authserv_id {
        return set_authserv(store, &id, &args.authserv_id, json).await;
    }
    if args.unattended_deletions || args.no_unattended_deletions {
        return set_unattended(store, &id, args.unattended_deletions, json).await;
    }
    let fallback = match (&args.fallback, &args.mail_account, args.no_fallback) {
        (Some(_), Some(name), _) => Some(crate::listing::Fallback {
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

/// Names the servers whose `Authentication-Results` the account trusts.
async fn set_authserv(store: &Store, id: &AccountId, ids: &[String], json: bool) -> Result<()> {
    let bad = ids.iter().find(|i| {
        i.is_empty()
            || !i
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
    });
    if let Some(bad) = bad {
        return Err(Error::validation(format!("{bad:?} is not an authserv-id"))
            .with_next_step("give the host name the server writes first in its Authentication-Results, e.g. mx.example.org"));
    }
    super::owner(store).account(id).await?;
    store.set_authserv_ids(id, ids).await?;
    if json {
        return print_json(
            None,
            &serde_json::json!({ "account": id, "authserv_ids": ids }),
        );
    }
    match ids.is_empty() {
        true => {
            crate::say!("account {id}: only its provider's known Authentication-Results are read")
        }
        false => crate::say!(
            "account {id}: Authentication-Results of {} are read; for mail indexed before, run: \
             mailbroker sync --account {id} --full",
            ids.join(", ")
        ),
    }
    Ok(())
}

/// Allows (asked at the terminal, since it lets deletions run without one) or stops
/// unattended permanent deletions of the account's mail.
async fn set_unattended(store: &Store, id: &AccountId, allowed: bool, json: bool) -> Result<()> {
    super::owner(store).account(id).await?;
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
            crate::output::one_line(a.email.as_deref().unwrap_or("-")),
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
            Some("sealed") => "secret sealed in the index",
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
