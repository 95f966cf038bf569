//! `mailbroker token …`: bearer tokens for MCP over HTTP that open only some accounts. The
//! home's own token (`mcp-token`) stays the owner's, opening every account.

use clap::Subcommand;
use mailbroker_core::{AccountId, Result};
use serde_json::json;

use super::rfc3339;
use crate::output::print_json;
use crate::store::{AccessToken, Store};

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token that opens only the named accounts; it is printed once, never again.
    Create {
        /// What the token is for (`assistant-work`); `token revoke` takes it.
        #[arg(long)]
        name: String,
        /// The account ids it opens, comma-separated.
        #[arg(long, value_name = "ID[,ID…]", value_delimiter = ',', required = true)]
        accounts: Vec<String>,
        /// Let it change mail (update_message, undo_change, sync_accounts) where the server
        /// allows writes at all (`--http-allow-writes`); without it the token only reads.
        #[arg(long)]
        allow_writes: bool,
    },
    /// List the tokens: names, accounts, whether they may write (never the tokens).
    List,
    /// Revoke a token: from the next request on it opens nothing.
    Revoke { name: String },
}

pub(super) async fn token(store: &Store, command: TokenCommand, json: bool) -> Result<()> {
    match command {
        TokenCommand::Create {
            name,
            accounts,
            allow_writes,
        } => create(store, &name, &accounts, allow_writes, json).await,
        TokenCommand::List => {
            let tokens = store.access_tokens().await?;
            if json {
                let views: Vec<_> = tokens.iter().map(view).collect();
                return print_json(Some("tokens"), &views);
            }
            if tokens.is_empty() {
                crate::say!(
                    "no tokens; create one with: mailbroker token create --name NAME --accounts ID"
                );
            }
            for t in &tokens {
                crate::say!("{}", line(t));
            }
            Ok(())
        }
        TokenCommand::Revoke { name } => {
            let revoked = store.revoke_access_token(&name).await?;
            if json {
                return print_json(Some("revoked"), &view(&revoked));
            }
            crate::say!("revoked: {}", line(&revoked));
            Ok(())
        }
    }
}

async fn create(
    store: &Store,
    name: &str,
    accounts: &[String],
    allow_writes: bool,
    json: bool,
) -> Result<()> {
    if name.trim().is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(mailbroker_core::Error::validation(format!(
            "token name {name:?}: give 1 to 64 characters, no control characters"
        ))
        .with_next_step("name it for who uses it: --name laptop-claude"));
    }
    let ids = accounts
        .iter()
        .map(|a| a.trim().parse())
        .collect::<Result<Vec<AccountId>>>()?;
    let secret = crate::util::random_hex(32)?;
    let token = store
        .add_access_token(name, &secret, &ids, allow_writes)
        .await?;
    if json {
        let mut out = view(&token);
        out["token"] = json!(secret);
        return print_json(None, &out);
    }
    crate::say!("{}", line(&token));
    crate::say!("token (shown once; keep it where the assistant reads it): {secret}");
    Ok(())
}

fn view(t: &AccessToken) -> serde_json::Value {
    json!({
        "name": t.name,
        "accounts": t.accounts,
        "allow_writes": t.allow_writes,
        "created_at": rfc3339(t.created_at),
    })
}

fn line(t: &AccessToken) -> String {
    let accounts: Vec<&str> = t.accounts.iter().map(AccountId::as_str).collect();
    format!(
        "{}  accounts: {}  {}  created {}",
        t.name,
        accounts.join(","),
        if t.allow_writes {
            "reads and writes"
        } else {
            "reads only"
        },
        rfc3339(t.created_at)
    )
}
