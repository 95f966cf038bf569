//! MCP sessions over HTTP, reclaimed: rmcp's local session manager, with a session idle for
//! `SessionLimits::idle` closed and at most `SessionLimits::max` kept.
//!
//! rmcp ends an idle session's worker but keeps its entry for good, so a listener that runs
//! for weeks (`serve`) would only grow; here every session is timed from its last request,
//! the idle ones are closed whenever a new one starts, and the least recently used one gives
//! way when the cap is reached. A client whose session was closed gets 404 and starts a new
//! one, as the transport specifies.
//!
//! A session's initialize parameters also rest in the index (`Shared`, rmcp's session
//! store), so another server process of the same index that receives its next request
//! restores it instead of answering 404: a client may be spread over several processes.
//! What a session has in flight (a server-to-client request, an open stream) stays where it
//! started.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::RestoreOutcome;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::worker::WorkerTransport;

use crate::store::Store;

/// How long a session may stay idle and how many are kept (docs/MCP.md says both).
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub idle: Duration,
    pub max: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            idle: Duration::from_secs(30 * 60),
            max: 100,
        }
    }
}

pub struct Sessions {
    inner: LocalSessionManager,
    limits: SessionLimits,
    /// Where sessions rest for the other processes (`Shared`): a session closed here, idle or
    /// given way, is removed there too, so no process restores it.
    shared: Store,
    /// When each open session was last used.
    used: Mutex<HashMap<SessionId, Instant>>,
}

impl Sessions {
    pub fn new(limits: SessionLimits, shared: Store) -> Sessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle);
        Sessions {
            inner,
            limits,
            shared,
            used: Mutex::new(HashMap::new()),
        }
    }

    fn touch(&self, id: &SessionId) {
        if let Ok(mut used) = self.used.lock() {
            used.insert(id.clone(), Instant::now());
        }
    }

    /// The sessions to close before one more starts: the idle ones, then the least recently
    /// used until there is room.
    fn to_reclaim(&self) -> Vec<SessionId> {
        let Ok(mut used) = self.used.lock() else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut by_age: Vec<(SessionId, Instant)> =
            used.iter().map(|(id, at)| (id.clone(), *at)).collect();
        by_age.sort_by_key(|(_, at)| *at);
        let room = self.limits.max.saturating_sub(1);
        let excess = by_age.len().saturating_sub(room);
        let closing: Vec<SessionId> = by_age
            .into_iter()
            .enumerate()
            .filter(|(n, (_, at))| *n < excess || now.duration_since(*at) >= self.limits.idle)
            .map(|(_, (id, _))| id)
            .collect();
        for id in &closing {
            used.remove(id);
        }
        closing
    }

    /// The session is gone from the map as soon as the inner manager says so.
    fn forget(&self, id: &SessionId) {
        if let Ok(mut used) = self.used.lock() {
            used.remove(id);
        }
    }

    fn seen<T>(
        &self,
        id: &SessionId,
        result: Result<T, LocalSessionManagerError>,
    ) -> Result<T, LocalSessionManagerError> {
        match &result {
            Err(LocalSessionManagerError::SessionNotFound(_)) => self.forget(id),
            _ => self.touch(id),
        }
        result
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        for id in self.to_reclaim() {
            let _ = self.close_session(&id).await;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.touch(&id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let answer = self.inner.initialize_session(id, message).await;
        self.seen(id, answer)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        let fresh = self
            .used
            .lock()
            .ok()
            .and_then(|used| used.get(id).map(|at| at.elapsed() < self.limits.idle));
        match fresh {
            Some(true) => self.inner.has_session(id).await,
            Some(false) => {
                self.close_session(id).await?;
                Ok(false)
            }
            // Not one of ours: another process may have started it (rmcp then asks `Shared`).
            None => Ok(false),
        }
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.forget(id);
        if let Err(e) = self.shared.delete_mcp_session(id).await {
            tracing::warn!(error = %e, "a closed session stays restorable");
        }
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await;
        self.seen(id, stream)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let accepted = self.inner.accept_message(id, message).await;
        self.seen(id, accepted)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await;
        self.seen(id, stream)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let restored = self.inner.restore_session(id.clone()).await?;
        self.touch(&id);
        Ok(restored)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await;
        self.seen(id, stream)
    }
}

/// How long a session's parameters rest in the index: a client idle longer starts anew.
const SHARED_FOR_SECS: i64 = 24 * 3600;

/// Sessions' initialize parameters in the index, for every server process of it.
pub struct Shared(pub Store);

#[async_trait::async_trait]
impl SessionStore for Shared {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        match self.0.mcp_session(id, SHARED_FOR_SECS).await? {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        Ok(self.0.put_mcp_session(id, &text, SHARED_FOR_SECS).await?)
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.delete_mcp_session(id).await?)
    }
}
