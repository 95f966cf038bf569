//! Serving a mock on a free loopback port, in the current tokio runtime, until it is
//! dropped. Binding comes first so a mock can put its own URL into what it serves (links).

use std::net::SocketAddr;

/// A loopback port bound and not yet served.
pub struct Bound {
    listener: tokio::net::TcpListener,
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
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let url = format!("http://{}", listener.local_addr()?);
    Ok(Bound { listener, url })
}

impl Bound {
    pub fn serve(self, app: axum::Router) -> Served {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let listener = self.listener;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Served {
            url: self.url,
            stop: Some(stop),
        }
    }
}
