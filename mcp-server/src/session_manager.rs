//! rmcp's in-memory session manager, each session holding a place of [`McpSessions`]: a
//! session is created only with the [`Reservation`] the HTTP layer took for its `initialize`
//! (handed over by [`opening`], since rmcp creates sessions without the request at hand),
//! bound to its id at once, and its place is given back when rmcp closes it (`DELETE`, the
//! idle time, the server's shutdown). Everything else is rmcp's `LocalSessionManager`.

use std::{cell::RefCell, future::Future, sync::Arc};

use futures_util::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::streamable_http_server::{
        session::{
            local::{LocalSessionManager, LocalSessionManagerError},
            ServerSseMessage, SessionId,
        },
        SessionManager,
    },
};

use crate::sessions::{McpSessions, Reservation};

tokio::task_local! {
    /// The place taken for the session the current request's `initialize` opens.
    static OPENING: RefCell<Option<Reservation>>;
}

/// Runs `request` (an `initialize` on its way to rmcp) with `reservation` as the place of the
/// session it opens; a reservation not used by then is given back.
pub async fn opening<F: Future>(reservation: Reservation, request: F) -> F::Output {
    OPENING
        .scope(RefCell::new(Some(reservation)), request)
        .await
}

/// Why a session could not be created or used.
#[derive(Debug, thiserror::Error)]
pub enum BoundSessionError {
    /// A session was to be created with no place taken for it (a request that was not seen
    /// as an `initialize`): refused, so no session exists outside the limits.
    #[error("no MCP session place was taken for this request")]
    NoPlace,
    /// rmcp's own error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// [`LocalSessionManager`] under the places of [`McpSessions`].
#[derive(Debug)]
pub struct BoundSessionManager {
    local: LocalSessionManager,
    sessions: Arc<McpSessions>,
}

impl BoundSessionManager {
    /// Sessions kept by `local`, their places in `sessions`.
    pub fn new(local: LocalSessionManager, sessions: Arc<McpSessions>) -> BoundSessionManager {
        BoundSessionManager { local, sessions }
    }
}

impl SessionManager for BoundSessionManager {
    type Error = BoundSessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let reservation = OPENING
            .try_with(|opening| opening.borrow_mut().take())
            .ok()
            .flatten()
            .ok_or(BoundSessionError::NoPlace)?;
        let (id, transport) = self.local.create_session().await?;
        // Bound before rmcp starts the session's worker, whose end calls `close_session`.
        reservation.bind(&id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.local.close_session(id).await;
        // rmcp has dropped the session from its map whatever `closed` says.
        self.sessions.release(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::create_stream(&self.local, id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::create_standalone_stream(&self.local, id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::resume(&self.local, id, last_event_id).await?)
    }
}
