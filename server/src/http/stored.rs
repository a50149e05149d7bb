//! What every handler answers about stored conversations: a store failure (`503` while the
//! database cannot be reached, `500` otherwise), a conversation that is not there (`404`),
//! a conversation's run lease (`409` while a reply is written in it), and a conversation's
//! head ([`head`]; [`owned_head`] for a caller allowed on its project, else `403`).

use rojos_agent::RunLease;
use rojos_conversations::{ConversationHead, ConversationId, StoreError};
use rojos_project_storage::ProjectId;

use super::{auth::Caller, error::ApiError};
use crate::state::AppState;

/// A store failure as the answer: `503` while the database cannot be reached (logged with
/// its cause), `500` for anything else.
pub(super) fn internal(e: StoreError) -> ApiError {
    if matches!(e, StoreError::Unavailable { .. }) {
        tracing::warn!(error = %rojos_agent::error_chain(&e), "conversation store unavailable");
        return ApiError::Unavailable(STORE_UNAVAILABLE.to_owned());
    }
    ApiError::internal("the conversation store failed", e)
}

/// The `503` body's text while the conversation database cannot be reached.
pub(super) const STORE_UNAVAILABLE: &str =
    "the conversation database cannot be reached right now; try again in a moment";

/// The `404` for conversation `id`.
pub(super) fn not_found(id: &ConversationId) -> ApiError {
    ApiError::NotFound(format!("no conversation {id}"))
}

/// The `409` message for a conversation with a run in progress.
const RUN_IN_PROGRESS: &str =
    "a reply is still being written in this conversation; wait for it to finish or stop it";

/// The run lease of conversation `id`: a new run takes it before it reads the history, and a
/// change that must not run beside a reply (a delete, an undo) while it works. `404` for a
/// conversation gone meanwhile; `409` while a reply is written, saying to wait (and, with
/// `then`, what to do afterwards).
pub(super) async fn lease_for_run(
    state: &AppState,
    id: &ConversationId,
    then: Option<&str>,
) -> Result<RunLease, ApiError> {
    let lease = state.agent.lease(id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => not_found(id),
        e => internal(e),
    })?;
    lease.ok_or_else(|| {
        ApiError::Conflict(match then {
            Some(then) => format!("{RUN_IN_PROGRESS}, then {then}"),
            None => RUN_IN_PROGRESS.to_owned(),
        })
    })
}

/// The conversation's head, once the caller is known to be allowed on its project: `404`
/// for an unknown one, `403` for one of another project.
pub(super) async fn owned_head(
    caller: &Caller,
    state: &AppState,
    id: &ConversationId,
) -> Result<ConversationHead, ApiError> {
    let head = head(state, id).await?;
    let project = ProjectId::parse(&head.project_id)
        .map_err(|e| ApiError::internal("the stored project id is invalid", e))?;
    caller.authorize(&project)?;
    Ok(head)
}

/// The head of conversation `id`, whoever asks: `404` when there is none.
pub(super) async fn head(
    state: &AppState,
    id: &ConversationId,
) -> Result<ConversationHead, ApiError> {
    state
        .agent
        .store
        .head(id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found(id))
}
