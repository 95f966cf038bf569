//! Who may give a person's yes. By default a person approves at a terminal
//! (`mailbroker approve`, `delete-staged`) or in the console, and an MCP client may ask its
//! own user by elicitation. With passkey approvals (`--approvals passkey` on `mcp` and
//! `serve`, or `console approvals passkey` for the whole home, set at a terminal) only the
//! console's passkey approves: a pseudo-terminal or a client answering its own question is
//! then no person at all, and is refused with the console's address as the next step.

use mailbroker_core::{Error, Result};

use crate::store::Store;

/// The home setting's name, and the console's address a refusal names.
const SETTING: &str = "approvals";
const CONSOLE: &str = "console_origin";
/// Where `mailbroker console` listens unless told otherwise.
pub const DEFAULT_CONSOLE: &str = "http://localhost:8766";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approvals {
    /// A terminal, the console, or the client's own user (elicitation).
    Person,
    /// Only a passkey in the console at `console` (its origin).
    Passkey { console: String },
}

impl Approvals {
    /// What applies here: passkeys when `flag` asks for them or the home says so.
    pub async fn of(store: &Store, flag: bool) -> Result<Approvals> {
        let home = store.home_setting(SETTING).await?;
        if !flag && home.as_deref() != Some("passkey") {
            return Ok(Approvals::Person);
        }
        Ok(Approvals::Passkey {
            console: Approvals::console(store).await?,
        })
    }

    /// The home's console (its origin): as `console approvals` recorded it, else where
    /// `mailbroker console` listens by default.
    pub async fn console(store: &Store) -> Result<String> {
        let console = store.home_setting(CONSOLE).await?;
        Ok(console.unwrap_or_else(|| DEFAULT_CONSOLE.to_string()))
    }

    /// The same, where the console is at `origin` (a listener's own).
    pub fn at(self, origin: &str) -> Approvals {
        match self {
            Approvals::Person => Approvals::Person,
            Approvals::Passkey { .. } => Approvals::Passkey {
                console: origin.to_string(),
            },
        }
    }

    /// Records the home's choice (asked at a terminal by the caller).
    pub async fn set(store: &Store, passkey: bool, console: &str) -> Result<()> {
        let value = if passkey { "passkey" } else { "terminal" };
        store.set_home_setting(SETTING, value, "cli").await?;
        store.set_home_setting(CONSOLE, console, "cli").await
    }

    pub fn passkey_only(&self) -> bool {
        matches!(self, Approvals::Passkey { .. })
    }

    /// Refuses `what` when only a passkey approves, naming where the person does it.
    pub fn refuse(&self, what: &str) -> Result<()> {
        match self {
            Approvals::Person => Ok(()),
            Approvals::Passkey { console } => Err(Error::confirmation_required(format!(
                "{what} is not how this home approves: only a passkey in the console does; \
                 nothing was changed"
            ))
            .with_next_step(format!("decide it in the console: {console}/console"))),
        }
    }
}
