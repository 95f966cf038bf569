//! Authorization for Microsoft accounts: the device code flow (RFC 8628: the person opens a
//! page on any device and types a code; it works on a headless machine) and refresh, through
//! the `oauth2` crate. The tokens are the account's secret (`mailbroker_oauth::Tokens`).
//!
//! Architecture Invariant: tokens never reach a log line, an error message or stdout. Only
//! the verification URL and the user code (no secret) are shown, by the caller, on stderr.

use mailbroker_core::{Consent, Error, Result};
use mailbroker_oauth::browser::{self, Refused};
use mailbroker_oauth::{Tokens, http, send, token_error, tokens_of};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, ClientId, DeviceAuthorizationUrl, RefreshToken, Scope,
    StandardDeviceAuthorizationResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};

pub const MICROSOFT_AUTHORITY: &str = "https://login.microsoftonline.com";
pub const GRAPH_BASE: &str = "https://graph.microsoft.com";
/// What mailbroker asks for: mail read and write, a refresh token, who the user is, and the
/// mailbox's category list (so a new category shows in Outlook with a colour). Tags work
/// without the last (`MASTER_LIST`): a message's categories need `Mail.ReadWrite` alone.
pub const SCOPES: [&str; 4] = ["Mail.ReadWrite", "offline_access", "User.Read", MASTER_LIST];

/// The scope that reads and adds the mailbox's master category list.
pub const MASTER_LIST: &str = "MailboxSettings.ReadWrite";

/// Whether `scopes` (as the token endpoint granted them) include `wanted`: by name, without
/// the resource prefix, case-blind.
pub fn granted(scopes: &[String], wanted: &str) -> bool {
    scopes.iter().any(|s| {
        s.rsplit('/')
            .next()
            .is_some_and(|name| name.eq_ignore_ascii_case(wanted))
    })
}

/// Where to authorize and which client to present; stored with the account (no secret).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphSettings {
    pub client_id: String,
    /// `common`, `organizations`, `consumers` or a tenant id.
    pub tenant: String,
    /// The identity platform's root (Microsoft's, or a mock's).
    pub authority: String,
    /// Graph's root (Microsoft's, or a mock's).
    pub graph_base: String,
}

impl GraphSettings {
    /// Refuses an endpoint a code or a token may not go to (`mailbroker_core::endpoint`):
    /// plain http to another host, a user name in the URL. The device code and token
    /// endpoints are under the authority.
    pub fn check_endpoints(&self) -> Result<()> {
        use mailbroker_core::endpoint::credential_url;
        credential_url("--authority", &self.authority)?;
        credential_url("--graph-base", &self.graph_base)?;
        Ok(())
    }

    fn endpoint(&self, which: &str) -> String {
        format!(
            "{}/{}/oauth2/v2.0/{which}",
            self.authority.trim_end_matches('/'),
            self.tenant
        )
    }
}

type DeviceClient = BasicClient<
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn client(settings: &GraphSettings) -> Result<DeviceClient> {
    let bad = |what: &str, e: String| Error::validation(format!("{what} is not a valid URL: {e}"));
    Ok(BasicClient::new(ClientId::new(settings.client_id.clone()))
        .set_device_authorization_url(
            DeviceAuthorizationUrl::new(settings.endpoint("devicecode"))
                .map_err(|e| bad("--authority", e.to_string()))?,
        )
        .set_token_uri(
            TokenUrl::new(settings.endpoint("token"))
                .map_err(|e| bad("--authority", e.to_string()))?,
        ))
}

/// The device code flow: asks for a code, hands the verification URL and the user code to
/// `show` (for the person), then polls as the server says (`authorization_pending`,
/// `slow_down`) until the person approved, declined or the code expired.
pub async fn device_login(
    settings: &GraphSettings,
    show: impl FnOnce(&str, &str),
    account: &str,
) -> Result<Tokens> {
    let oauth = client(settings)?;
    let http = send(http()?);
    let details: StandardDeviceAuthorizationResponse = oauth
        .exchange_device_code()
        .add_scopes(SCOPES.iter().map(|s| Scope::new(s.to_string())))
        .request_async(&http)
        .await
        .map_err(|e| refused(e, settings, account))?;
    show(
        details.verification_uri().as_str(),
        details.user_code().secret(),
    );
    let response = oauth
        .exchange_device_access_token(&details)
        .request_async(&http, tokio::time::sleep, None)
        .await
        .map_err(|e| device_error(e, settings, account))?;
    let mut tokens = tokens_of(&response, None, None)?;
    if tokens.scopes.is_empty() {
        tokens.scopes = SCOPES.iter().map(|s| s.to_string()).collect();
    }
    Ok(tokens)
}

/// A refused device grant: declined, expired or otherwise refused, each with its next step.
/// An app registered without public client flows is refused as a confidential client with
/// no secret (AADSTS7000218); only its registration can fix that, so that is what is said.
fn device_error<RE: std::error::Error + 'static>(
    e: oauth2::RequestTokenError<RE, oauth2::DeviceCodeErrorResponse>,
    settings: &GraphSettings,
    account: &str,
) -> Error {
    use oauth2::DeviceCodeErrorResponseType as T;
    match e {
        oauth2::RequestTokenError::ServerResponse(r)
            if r.error_description()
                .is_some_and(|d| d.starts_with("AADSTS7000218")) =>
        {
            Error::validation(format!(
                "Microsoft treats app {} as a confidential client: \"Allow public client \
                 flows\" is off in its registration (AADSTS7000218), so it cannot sign in \
                 with a device code",
                settings.client_id
            ))
            .with_next_step(
                "in the Microsoft Entra admin center, open App registrations > the app > \
                 Authentication, set \"Allow public client flows\" to Yes and save, then run \
                 the command again (docs/setup-microsoft.md); or sign in with --browser",
            )
        }
        oauth2::RequestTokenError::ServerResponse(r) => {
            let why = match r.error() {
                T::ExpiredToken => "the code expired before it was entered".to_string(),
                T::AccessDenied => "the sign-in was declined".to_string(),
                other => format!("the authorization server refused: {other}"),
            };
            Error::auth_required(why)
                .with_next_step(format!("run the command again for account {account}"))
        }
        other => Error::provider_unavailable(format!("token endpoint: {other}")),
    }
}

/// The authorization code flow with PKCE and a loopback redirect, for a person who would
/// rather consent in a browser on this machine than type a code.
pub async fn browser_login(
    settings: &GraphSettings,
    how: Consent,
    account: &str,
) -> Result<Tokens> {
    let bad = |e: oauth2::url::ParseError| {
        Error::validation(format!("--authority is not a valid URL: {e}"))
    };
    let oauth = BasicClient::new(ClientId::new(settings.client_id.clone()))
        .set_auth_uri(AuthUrl::new(settings.endpoint("authorize")).map_err(bad)?)
        .set_token_uri(TokenUrl::new(settings.endpoint("token")).map_err(bad)?);
    let mut tokens = browser::authorize(oauth, &SCOPES, &[], how, account)
        .await
        .map_err(|e| match e {
            Refused::Grant(e) => refused(e, settings, account),
            Refused::Other(e) => e,
        })?;
    if tokens.scopes.is_empty() {
        tokens.scopes = SCOPES.iter().map(|s| s.to_string()).collect();
    }
    Ok(tokens)
}

/// Signs in as the person chose: in a browser, or by a device code (shown on stderr).
pub async fn sign_in(settings: &GraphSettings, how: Consent, account: &str) -> Result<Tokens> {
    match how.browser {
        true => browser_login(settings, how, account).await,
        false => device_login(settings, show_code, account).await,
    }
}

/// Tells the person, on stderr, where to sign in and what to type.
pub fn show_code(uri: &str, code: &str) {
    eprintln!("To sign in, open {uri} and enter the code {code}");
}

/// A fresh access token from the refresh token; a refused grant is `auth_required`, or
/// `insufficient_scope` when what is missing is consent to the scopes.
pub async fn refresh(settings: &GraphSettings, tokens: &Tokens, account: &str) -> Result<Tokens> {
    let response = client(settings)?
        .exchange_refresh_token(&RefreshToken::new(tokens.refresh_token.clone()))
        .request_async(&send(http()?))
        .await
        .map_err(|e| refused(e, settings, account))?;
    let mut fresh = tokens_of(&response, Some(&tokens.refresh_token), None)?;
    if fresh.scopes.is_empty() {
        fresh.scopes = tokens.scopes.clone();
    }
    Ok(fresh)
}

/// AADSTS codes that mean the app lacks consent to a scope rather than a valid sign-in: no
/// consent (65001), consent declined (65004), a scope the app may not ask for (70011).
const CONSENT_CODES: [&str; 3] = ["AADSTS65001", "AADSTS65004", "AADSTS70011"];

/// A refused token request in our vocabulary. The AADSTS code leads the description.
fn refused<RE: std::error::Error + 'static>(
    e: oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
    settings: &GraphSettings,
    account: &str,
) -> Error {
    let oauth2::RequestTokenError::ServerResponse(r) = &e else {
        return token_error(e, account);
    };
    let description = r.error_description().map_or("", String::as_str);
    let consent = matches!(
        r.error(),
        oauth2::basic::BasicErrorResponseType::InvalidScope
    ) || CONSENT_CODES.iter().any(|c| description.starts_with(c));
    if !consent {
        return token_error(e, account);
    }
    let code = description.split(':').next().unwrap_or_default();
    Error::insufficient_scope(format!(
        "Microsoft refused consent to {} ({code})",
        SCOPES.join(" ")
    ))
    .with_next_step(format!(
        "have the tenant's administrator consent to these permissions for client {}, then run: mailbroker account login {account}",
        settings.client_id
    ))
}
