//! The offline half of a provider: everything the core asks of an adapter without a session
//! of its own (tag rules, the printable plan, whether an operation is possible, how to open a
//! session, login and the doctor). One `Adapter` per provider crate; the registry is a table
//! of them.
//!
//! Architecture Invariant: an adapter reads an account only through `AccountInfo` (what was
//! stored at `account add`) and its secrets only through `Secrets`; it never touches the
//! store. Account setup differs per provider (its `account add` arguments), so each crate has
//! its own `setup` function that returns a `NewAccount` for the core to store.

use async_trait::async_trait;

use crate::{
    AccountId, Capabilities, DeleteBatch, DeleteMode, Error, MailboxInfo, Provider, ProviderKind,
    Result, WriteBatch,
};

/// What an adapter is told of an account: what its `setup` stored.
#[derive(Debug, Clone, Copy)]
pub struct AccountInfo<'a> {
    pub id: &'a AccountId,
    /// The adapter's own settings (endpoints, host, port), as its `setup` wrote them.
    pub settings: &'a serde_json::Value,
    pub capabilities: &'a Capabilities,
    /// The account-wide cursor the last sync stored (`SyncSink::account_cursor`).
    pub cursor: Option<&'a str>,
}

impl AccountInfo<'_> {
    /// The settings as the adapter's own type.
    pub fn settings<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.settings.clone())
            .map_err(|e| Error::internal(format!("account {}: bad settings: {e}", self.id)))
    }
}

/// One account's secrets, wherever the store keeps them (the index or the OS keyring).
#[async_trait]
pub trait Secrets: Send + Sync {
    async fn get(&self, kind: &str) -> Result<String>;
    async fn set(&self, kind: &str, value: &str) -> Result<()>;
    /// An owned handle on the same secrets, for a session that renews its secret while it
    /// runs (a refresh token rotated mid-sync must be stored before the next call needs it).
    fn shared(&self) -> std::sync::Arc<dyn Secrets>;
}

/// An account a `setup` function made, ready to store: nothing is stored unless every step
/// of the setup succeeded.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub provider: ProviderKind,
    pub email: Option<String>,
    pub settings: serde_json::Value,
    pub capabilities: Capabilities,
    pub cursor: Option<String>,
    /// (kind, value): the one secret the account needs (a password, OAuth tokens); none
    /// where another program keeps the credentials (Mail.app).
    pub secret: Option<(String, String)>,
    pub mailboxes: Vec<MailboxInfo>,
}

/// How a person takes part in an OAuth consent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consent {
    /// Open the system browser (else the URL is printed).
    pub open_browser: bool,
    /// Also accept the final redirect URL pasted on stdin.
    pub paste: bool,
    /// Consent in a browser where the provider's default is a device code.
    pub browser: bool,
}

/// What a login asks for beyond what the account has (`account upgrade-scope`): the
/// permission permanent deletion needs, the one server-side rules need. What the account was
/// granted before is asked for again as well.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Upgrade {
    pub permanent_delete: bool,
    pub rules: bool,
}

/// What `account doctor` found: one line for a person, the details for `--json`.
#[derive(Debug, Clone)]
pub struct DoctorReport {
    pub summary: String,
    pub details: serde_json::Value,
}

/// What a change or a deletion asks of a provider, for `Adapter::check` before anything is
/// planned or staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Read or flagged state.
    Flags,
    Move,
    Tags,
    Delete(DeleteMode),
}

/// How the planner groups a request's messages into batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// By what each message still needs: a batch carries one exact operation (an IMAP
    /// STORE's flags; Graph's per-message PATCH).
    Exact,
    /// Every message that needs anything gets the request's whole operation, and where
    /// nothing moves one batch carries the account's messages of every mailbox: the
    /// provider's edits are idempotent and one call carries many messages of any mailbox
    /// with one operation (Gmail's `batchModify`), so fewer, fuller calls beat exact ones.
    /// (A move's source differs by mailbox, so a move's batches stay per mailbox.)
    Whole,
}

/// What opening a session needs, already read from the index (settings, a fresh token), so
/// only the network work is left for `connect`.
#[async_trait]
pub trait Connector: Send {
    async fn connect(self: Box<Self>) -> Result<Box<dyn Provider>>;
}

/// A session that needs no connection step of its own (an HTTP API client).
pub struct Ready(pub Box<dyn Provider>);

#[async_trait]
impl Connector for Ready {
    async fn connect(self: Box<Self>) -> Result<Box<dyn Provider>> {
        Ok(self.0)
    }
}

#[async_trait]
pub trait Adapter: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// Checks a tag against the provider's rules (nothing sent). `new`: no indexed message
    /// of the account carries it yet.
    fn validate_tag(&self, account: &AccountInfo<'_>, tag: &str, new: bool) -> Result<()>;

    /// The exact text the server will be given for `rule` (a Sieve block, a filter's JSON),
    /// with its move resolved among the account's selectable `mailboxes` (name, role);
    /// nothing sent. A term or an action the provider cannot say is refused by name.
    fn rule_text(
        &self,
        _account: &AccountInfo<'_>,
        _rule: &crate::Rule,
        _mailboxes: &[(String, Option<crate::Role>)],
    ) -> Result<String> {
        Err(Error::unsupported(
            "mailbroker cannot keep rules on this account's server yet",
        )
        .with_next_step("make the rule in the provider's own settings, or use an IMAP account with ManageSieve"))
    }

    /// Whether the provider has this tag though no indexed message carries it (a label with
    /// no messages yet), from what the last sync stored.
    fn tag_exists(&self, _account: &AccountInfo<'_>, _tag: &str) -> bool {
        false
    }

    /// Refuses what the account can never do as it is set up (a server without the
    /// extension a move or a permanent deletion needs), before anything is planned or staged,
    /// with a sentence saying why. A grant the person can still add (an OAuth scope) is not
    /// refused here: it is checked when the operation runs.
    fn check(&self, _account: &AccountInfo<'_>, _op: Operation) -> Result<()> {
        Ok(())
    }

    /// The requests a batch will send, one line each, for dry runs and the journal.
    fn plan(&self, account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String>;

    /// How a request's messages group into batches (`Grouping`).
    fn grouping(&self) -> Grouping {
        Grouping::Exact
    }

    /// The requests a staged deletion's batch will send.
    fn plan_delete(&self, account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String>;

    /// Reads what a session needs (refreshing an expired token through `secrets`).
    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>>;

    /// Authorizes again (after a revoke; `upgrade` adds what it names) and stores the new
    /// secret; returns the capabilities it grants.
    async fn login(
        &self,
        account: &AccountInfo<'_>,
        _secrets: &dyn Secrets,
        _upgrade: Upgrade,
        _how: Consent,
    ) -> Result<Capabilities> {
        Err(Error::unsupported(format!(
            "account {} has no login of its own: its password is given at account add",
            account.id
        ))
        .with_next_step(format!(
            "run: mailbroker account remove {0}, then mailbroker account add … --id {0}",
            account.id
        )))
    }

    /// Checks that the account works: its secret, what it grants, that the server answers.
    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<DoctorReport>;
}
