//! `mailbroker token …`: bearer tokens for MCP over HTTP that open only some accounts. The
//! home's own token (`mcp-token`) stays the owner's, opening every account.

use clap::Subcommand;
use mailbroker_core::{AccountId, Result};
use serde_json::json;

use super::rfc3339;
use crate::output::print_json;
use crate::store::{AccessToken, Grant, Store};

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
    /// List the tokens and the grants hosted assistants were given by OAuth (`oauth-N`):
    /// names, accounts, whether they may write (never the tokens).
    List,
    /// Revoke a token or an OAuth grant (`oauth-N`): from the next request on it opens
    /// nothing.
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
            let mut tokens: Vec<(AccessToken, Option<String>)> =
                (store.access_tokens().await?.into_iter())
                    .map(|t| (t, None))
                    .collect();
            for (grant, client) in store.grants().await? {
                tokens.push((as_token(&grant), Some(client)));
            }
            if json {
                let views: Vec<_> = tokens.iter().map(|(t, c)| view(t, c.as_deref())).collect();
                return print_json(Some("tokens"), &views);
            }
            if tokens.is_empty() {
                crate::say!(
                    "no tokens; create one with: mailbroker token create --name NAME --accounts ID"
                );
            }
            for (t, client) in &tokens {
                crate::say!("{}", line(t, client.as_deref()));
            }
            Ok(())
        }
        TokenCommand::Revoke { name } => {
            let (revoked, client) = revoke(store, &name).await?;
            if json {
                return print_json(Some("revoked"), &view(&revoked, client.as_deref()));
            }
            crate::say!("revoked: {}", line(&revoked, client.as_deref()));
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
        let mut out = view(&token, None);
        out["token"] = json!(secret);
        return print_json(None, &out);
    }
    crate::say!("{}", line(&token, None));
    crate::say!("token (shown once; keep it where the assistant reads it): {secret}");
    Ok(())
}

/// An OAuth grant as `token list` names it: `oauth-N`.
fn as_token(g: &Grant) -> AccessToken {
    AccessToken {
        name: format!("oauth-{}", g.id),
        accounts: g.accounts.clone(),
        allow_writes: g.allow_writes,
        created_at: g.created_at,
    }
}

/// Revokes the token `name`, or the OAuth grant it names (`oauth-N`): what it was, and the
/// grant's client.
async fn revoke(store: &Store, name: &str) -> Result<(AccessToken, Option<String>)> {
    let grant = name
        .strip_prefix("oauth-")
        .and_then(|n| n.parse::<i64>().ok());
    let live = store.grants().await?;
    match grant.and_then(|id| live.into_iter().find(|(g, _)| g.id == id)) {
        Some((g, client)) => {
            store.revoke_grant(g.id).await?;
            Ok((as_token(&g), Some(client)))
        }
        None => Ok((store.revoke_access_token(name).await?, None)),
    }
}

fn view(t: &AccessToken, client: Option<&str>) -> serde_json::Value {
    let mut v = json!({
        "name": t.name,
        "accounts": t.accounts,
        "allow_writes": t.allow_writes,
        "created_at": rfc3339(t.created_at),
    });
    if let Some(client) = client {
        v["oauth_client"] = json!(client);
    }
    v
}

fn line(t: &AccessToken, client: Option<&str>) -> String {
    let accounts: Vec<&str> = t.accounts.iter().map(AccountId::as_str).collect();
    let by = client.map_or(String::new(), |c| format!("  OAuth client: {c}"));
    format!(
        "{}{by}  accounts: {}  {}  created {}",
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
