//! The Graph adapter's offline half: setup by the device code flow, the connector (an
//! expired token refreshed and stored first; one Graph refuses later is renewed by the
//! client), login, the doctor, and category rules.

use async_trait::async_trait;
use mailbroker_core::{
    AccountId, AccountInfo, Adapter, Capabilities, Connector, Consent, DeleteBatch, DoctorReport,
    Error, NewAccount, ProviderKind, Ready, Result, Secrets, WriteBatch,
};
use mailbroker_oauth::{SECRET_KIND, Tokens, encode};

use crate::GraphProvider;
use crate::client::{Client, Renewal};
use crate::oauth::{GraphSettings, refresh, sign_in};

/// Outlook's longest category name.
pub const MAX_CATEGORY_LEN: u32 = 255;

fn capabilities(tokens: &Tokens) -> Capabilities {
    Capabilities {
        extensions: tokens.scopes.clone(),
        custom_tags: true,
        max_tag_len: Some(MAX_CATEGORY_LEN),
    }
}

/// Signs in (by a device code, or in a browser when the person asked), reads who the user is
/// and the folder tree: an account to store.
pub async fn setup(
    id: &AccountId,
    email: Option<String>,
    settings: GraphSettings,
    how: Consent,
) -> Result<NewAccount> {
    settings.check_endpoints()?;
    let tokens = sign_in(&settings, how, id.as_str()).await?;
    let client = Client::new(
        &settings.graph_base,
        tokens.access_token.clone(),
        id.as_str(),
    )?;
    let me = client.get("me").await?;
    let folders = crate::sync::folders(&client).await?;
    let address = me["mail"]
        .as_str()
        .or(me["userPrincipalName"].as_str())
        .map(str::to_string);
    Ok(NewAccount {
        provider: ProviderKind::Graph,
        email: email.or(address),
        settings: serde_json::to_value(&settings).map_err(|e| Error::internal(e.to_string()))?,
        capabilities: capabilities(&tokens),
        cursor: None,
        secret: Some((SECRET_KIND.to_string(), encode(&tokens)?)),
        mailboxes: folders.iter().map(crate::convert::Folder::info).collect(),
    })
}

pub struct Graph;

#[async_trait]
impl Adapter for Graph {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Graph
    }

    /// Outlook category names: not empty, at most 255 characters, no control characters and
    /// no comma (Outlook keeps a message's categories as one comma-separated list).
    /// A new category must read as what it is: `" Work "` beside `Work` would be a second
    /// category a person cannot tell apart, and bidi controls reorder how a name shows. One
    /// the account already carries (set by another client) can still be named exactly.
    fn validate_tag(&self, _account: &AccountInfo<'_>, tag: &str, new: bool) -> Result<()> {
        let bidi = |c: char| matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        let problem = if tag.trim().is_empty() {
            Some("is empty")
        } else if tag.chars().count() > MAX_CATEGORY_LEN as usize {
            Some("is longer than Outlook's 255 characters")
        } else if tag.chars().any(|c| c.is_control() || c == ',') {
            Some("contains a comma or a control character")
        } else if new && tag.trim() != tag {
            Some("begins or ends with a space")
        } else if new && tag.chars().any(bidi) {
            Some("contains a bidirectional control character")
        } else {
            None
        };
        match problem {
            Some(p) => Err(Error::validation(format!("category {tag:?} {p}"))
                .with_next_step("name the category without them")),
            None => Ok(()),
        }
    }

    fn plan(&self, _account: &AccountInfo<'_>, batch: &WriteBatch) -> Vec<String> {
        crate::write::plan(batch)
    }

    fn plan_delete(&self, _account: &AccountInfo<'_>, batch: &DeleteBatch) -> Vec<String> {
        crate::write::plan_delete(batch)
    }

    async fn connector(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<Box<dyn Connector>> {
        let provider = GraphProvider::signed_in_as(account, secrets).await?;
        Ok(Box::new(Ready(Box::new(provider))))
    }

    /// The `messageRule` JSON; its folder by path (its id is looked up on approval) and its
    /// place as the first after the person's rules.
    fn rule_text(
        &self,
        _account: &AccountInfo<'_>,
        rule: &mailbroker_core::Rule,
        mailboxes: &[(String, Option<mailbroker_core::Role>)],
    ) -> Result<String> {
        let folder = crate::rules::target(rule, mailboxes)?.map(|name| format!("{name} (its id)"));
        let mut text = crate::rules::message_rule(rule, folder.as_deref(), 1)?;
        text["sequence"] = serde_json::json!("after the account's own rules");
        serde_json::to_string_pretty(&text).map_err(|e| Error::internal(e.to_string()))
    }

    async fn login(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
        _upgrade: mailbroker_core::Upgrade,
        how: Consent,
    ) -> Result<Capabilities> {
        let settings: GraphSettings = account.settings()?;
        let tokens = sign_in(&settings, how, account.id.as_str()).await?;
        secrets.set(SECRET_KIND, &encode(&tokens)?).await?;
        Ok(capabilities(&tokens))
    }

    async fn doctor(
        &self,
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<DoctorReport> {
        let (settings, tokens) = signed_in(account, secrets).await?;
        let scopes = tokens.scopes.clone();
        let client = Client::signed_in(
            &settings.graph_base,
            renewal(&settings, tokens, secrets),
            account.id.as_str(),
        )?;
        let me = client.get("me").await?;
        let address = me["mail"].as_str().unwrap_or_default().to_string();
        let missing: Vec<&str> = crate::oauth::SCOPES
            .into_iter()
            .filter(|s| !crate::oauth::granted(&scopes, s))
            .collect();
        let lacking = match missing.is_empty() {
            true => String::new(),
            false => format!(
                "; not granted: {} (categories mailbroker adds show without a colour in \
                 Outlook, as they are not added to the category list); to grant it, run: \
                 mailbroker account login {}",
                missing.join(" "),
                account.id
            ),
        };
        Ok(DoctorReport {
            summary: format!(
                "{}: token ok, Graph reachable at {}, {address}, scopes: {}{lacking}",
                account.id,
                settings.graph_base,
                scopes.join(" ")
            ),
            details: serde_json::json!({
                "account": account.id,
                "email": address,
                "scopes": scopes,
                "missing_scopes": missing,
                "category_list": missing.is_empty(),
                "graph_base": settings.graph_base,
            }),
        })
    }
}

/// The account's settings and tokens, an expired access token refreshed and stored first.
async fn signed_in(
    account: &AccountInfo<'_>,
    secrets: &dyn Secrets,
) -> Result<(GraphSettings, Tokens)> {
    mailbroker_oauth::access_token::<GraphSettings>(account, secrets, refresh).await
}

fn renewal(settings: &GraphSettings, tokens: Tokens, secrets: &dyn Secrets) -> Renewal {
    Renewal {
        settings: settings.clone(),
        tokens,
        secrets: secrets.shared(),
    }
}

impl GraphProvider {
    async fn signed_in_as(
        account: &AccountInfo<'_>,
        secrets: &dyn Secrets,
    ) -> Result<GraphProvider> {
        let (settings, tokens) = signed_in(account, secrets).await?;
        let master_list = crate::oauth::granted(&tokens.scopes, crate::oauth::MASTER_LIST);
        let renewal = renewal(&settings, tokens, secrets);
        Ok(
            GraphProvider::signed_in(&settings.graph_base, renewal, account.id.as_str())?
                .with_category_list(master_list),
        )
    }
}
