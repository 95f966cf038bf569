//! Opening an authenticated IMAP session: TCP, TLS (implicit or STARTTLS), greeting, LOGIN.
//!
//! Every network step has a timeout and names its verb in the error. Credentials are passed
//! to the server and dropped; they never appear in an error or a log line.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};
use std::time::Duration;

use mailbroker_core::{Error, Result};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;

pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// TLS from the first byte (port 993).
    Implicit,
    /// Plain connection upgraded with STARTTLS before login (port 143).
    Starttls,
    /// No TLS at all; only sensible on loopback.
    None,
}

impl FromStr for TlsMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "implicit" => Ok(TlsMode::Implicit),
            "starttls" => Ok(TlsMode::Starttls),
            "none" => Ok(TlsMode::None),
            other => Err(Error::validation(format!(
                "tls mode {other:?} is not one of implicit, starttls, none"
            ))),
        }
    }
}

impl TlsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Implicit => "implicit",
            TlsMode::Starttls => "starttls",
            TlsMode::None => "none",
        }
    }
}

/// Everything needed to open a session. `password` is a secret: `Debug` hides it.
#[derive(Clone)]
pub struct ImapConfig {
    pub host: String,
    pub port: u16,
    pub tls: TlsMode,
    pub username: String,
    pub password: String,
    /// PEM bundle of extra trusted roots (a private CA), added to the public roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Extensions the server advertises that mailbroker must not use (a workaround for
    /// servers with a broken implementation, e.g. `QRESYNC`).
    pub disabled_extensions: Vec<String>,
    /// Allow `TlsMode::None` to a host that is not loopback: the password then crosses the
    /// network in clear text. Only ever set by the person, with a warning.
    pub allow_plaintext: bool,
    /// The host's ManageSieve port, where the account's rules are kept (`None`: 4190).
    pub sieve_port: Option<u16>,
}

impl fmt::Debug for ImapConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImapConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .finish_non_exhaustive()
    }
}

/// The byte stream under an IMAP session: plain TCP or TLS over TCP.
#[derive(Debug)]
pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

pub(crate) type Session = async_imap::Session<Transport>;

/// Runs one network step under a timeout, naming the verb if it takes too long.
pub(crate) async fn timed<T>(
    verb: &str,
    limit: Duration,
    fut: impl Future<Output = T>,
) -> Result<T> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| Error::provider_unavailable(format!("imap {verb} timed out")))
}

/// Maps an async-imap error of command `verb` to our vocabulary.
pub(crate) fn imap_error(verb: &str, e: async_imap::error::Error) -> Error {
    use async_imap::error::Error as E;
    match e {
        E::No(text) => Error::provider_write_failed(format!("imap {verb} refused: {text}")),
        E::Bad(text) => Error::provider_write_failed(format!("imap {verb} rejected: {text}")),
        E::Io(io) => Error::provider_unavailable(format!("imap {verb} failed: {io}")),
        E::ConnectionLost => Error::provider_unavailable(format!("imap {verb}: connection lost")),
        other => Error::provider_unavailable(format!("imap {verb} failed: {other}")),
    }
}

pub(crate) async fn tls_wrap(config: &ImapConfig, tcp: TcpStream) -> Result<Transport> {
    let connector = TlsConnector::from(mailbroker_managesieve::account::tls(
        config.ca_pem.as_deref(),
    )?);
    let name = ServerName::try_from(config.host.clone())
        .map_err(|_| Error::validation(format!("{:?} is not a valid host name", config.host)))?;
    let tls = timed(
        "tls handshake",
        CONNECT_TIMEOUT,
        connector.connect(name, tcp),
    )
    .await?
    .map_err(|e| {
        Error::provider_unavailable(format!(
            "tls handshake with {}:{} failed: {e}",
            config.host, config.port
        ))
        .with_next_step("check the host name, or pass the server's CA with --ca-file PEM")
    })?;
    Ok(Transport::Tls(Box::new(tls)))
}

async fn read_greeting(client: &mut async_imap::Client<Transport>) -> Result<()> {
    match timed("greeting", CONNECT_TIMEOUT, client.read_response()).await? {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Error::provider_unavailable(
            "imap server closed the connection before its greeting",
        )),
        Err(e) => Err(Error::provider_unavailable(format!("imap greeting: {e}"))),
    }
}

/// Connects, secures and logs in. Returns the capabilities the server sent with its LOGIN
/// answer, when it did (saves a CAPABILITY round trip).
pub(crate) async fn open(
    config: &ImapConfig,
) -> Result<(Session, Option<async_imap::types::Capabilities>)> {
    config.check_plaintext()?;
    let addr = format!("{}:{}", config.host, config.port);
    let tcp = timed("connect", CONNECT_TIMEOUT, TcpStream::connect(&addr))
        .await?
        .map_err(|e| {
            Error::provider_unavailable(format!("cannot connect to {addr}: {e}"))
                .with_next_step("check --host and --port, and that the server is running")
        })?;
    let _ = tcp.set_nodelay(true);
    tracing::debug!("imap: connected");
    let client = match config.tls {
        TlsMode::Implicit => {
            let mut client = async_imap::Client::new(tls_wrap(config, tcp).await?);
            read_greeting(&mut client).await?;
            client
        }
        TlsMode::None => {
            let mut client = async_imap::Client::new(Transport::Plain(tcp));
            read_greeting(&mut client).await?;
            client
        }
        TlsMode::Starttls => {
            let mut client = async_imap::Client::new(Transport::Plain(tcp));
            read_greeting(&mut client).await?;
            timed(
                "starttls",
                CONNECT_TIMEOUT,
                client.run_command_and_check_ok("STARTTLS", None),
            )
            .await?
            .map_err(|e| imap_error("starttls", e))?;
            let Transport::Plain(tcp) = client.into_inner() else {
                return Err(Error::internal(
                    "starttls on a connection that is already tls",
                ));
            };
            async_imap::Client::new(tls_wrap(config, tcp).await?)
        }
    };
    tracing::debug!("imap: greeted");
    let login = timed(
        "login",
        CONNECT_TIMEOUT,
        client.login_with_capabilities(&config.username, &config.password),
    )
    .await?;
    login.map_err(|(e, _client)| match e {
        async_imap::error::Error::No(text) => Error::auth_required(format!(
            "imap login as {:?} refused by {addr}: {text}",
            config.username
        ))
        .with_next_step(
            "check the username and password (an app password, where the provider needs one)",
        ),
        other => imap_error("login", other),
    })
}

/// What is stored for an IMAP account: everything `ImapConfig` holds except the password.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ImapSettings {
    pub host: String,
    pub port: u16,
    pub tls: String,
    pub username: String,
    /// The extra CA as PEM text, stored so the account works after the file moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_plaintext: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sieve_port: Option<u16>,
}

impl ImapConfig {
    /// Refuses a connection without TLS to a host other than this machine, unless the person
    /// allowed it: LOGIN would send the password in clear text across the network.
    pub fn check_plaintext(&self) -> Result<()> {
        if self.tls != TlsMode::None
            || self.allow_plaintext
            || mailbroker_core::endpoint::is_this_machine(&self.host)
        {
            return Ok(());
        }
        Err(Error::validation(format!(
            "--tls none would send the password to {} in clear text; it is allowed only to \
             this machine (localhost, 127.0.0.1, ::1)",
            self.host
        ))
        .with_next_step("use --tls implicit or --tls starttls, or add --allow-plaintext if you accept that risk"))
    }

    pub fn settings(&self) -> ImapSettings {
        ImapSettings {
            host: self.host.clone(),
            port: self.port,
            tls: self.tls.as_str().to_string(),
            username: self.username.clone(),
            ca_pem: self
                .ca_pem
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            disabled_extensions: self.disabled_extensions.clone(),
            allow_plaintext: self.allow_plaintext,
            sieve_port: self.sieve_port,
        }
    }

    pub fn from_settings(settings: ImapSettings, password: String) -> Result<ImapConfig> {
        Ok(ImapConfig {
            tls: settings.tls.parse()?,
            host: settings.host,
            port: settings.port,
            username: settings.username,
            password,
            ca_pem: settings.ca_pem.map(String::into_bytes),
            disabled_extensions: settings.disabled_extensions,
            allow_plaintext: settings.allow_plaintext,
            sieve_port: settings.sieve_port,
        })
    }
}
