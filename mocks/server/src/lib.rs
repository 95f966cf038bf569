//! What the mocks share: serving on a free loopback port, in the current tokio runtime,
//! until dropped, over plain HTTP or TLS (for clients that insist on https, as Microsoft's
//! sign-in library does); the providers' published schemas (`published`); and the record
//! of what a client sent that those schemas lack (`contract`). Binding comes first so a
//! mock can put its own URL into what it serves (links).

pub mod contract;
pub mod published;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A loopback port bound and not yet served.
pub struct Bound {
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    pub url: String,
}

/// A mock being served; it stops when dropped.
pub struct Served {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Binds a free port on 127.0.0.1.
pub async fn bind() -> std::io::Result<Bound> {
    bind_on([127, 0, 0, 1]).await
}

/// Binds a free port on this loopback address (`127.0.0.2` stands for another host).
pub async fn bind_on(ip: [u8; 4]) -> std::io::Result<Bound> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((ip, 0))).await?;
    let url = format!("http://{}", listener.local_addr()?);
    Ok(Bound {
        listener,
        tls: None,
        url,
    })
}

/// Binds a free port on 127.0.0.1 to serve over TLS with the certificate chain and key in
/// these PEM files.
pub async fn bind_tls(cert_pem: &Path, key_pem: &Path) -> std::io::Result<Bound> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_pem)
        .and_then(|certs| certs.collect())
        .map_err(std::io::Error::other)?;
    let key = PrivateKeyDer::from_pem_file(key_pem).map_err(std::io::Error::other)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(std::io::Error::other)?;
    let mut bound = bind().await?;
    bound.url = bound.url.replacen("http://", "https://", 1);
    bound.tls = Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)));
    Ok(bound)
}

impl Bound {
    pub fn serve(self, app: axum::Router) -> Served {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let stopped = async {
            let _ = stopped.await;
        };
        let listener = self.listener;
        match self.tls {
            None => tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(stopped)
                    .await;
            }),
            Some(acceptor) => tokio::spawn(async move {
                let tls = TlsListener { listener, acceptor };
                let _ = axum::serve(tls, app).with_graceful_shutdown(stopped).await;
            }),
        };
        Served {
            url: self.url,
            stop: Some(stop),
        }
    }
}

/// A listener whose connections are TLS sessions; a failed handshake is dropped and the next
/// connection taken.
struct TlsListener {
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.listener.accept().await else {
                // Out of descriptors, say: give the system a moment.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let handshake = self.acceptor.accept(tcp);
            if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(5), handshake).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}
