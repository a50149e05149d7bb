//! `POST /chat`: admit the chat under the limits (`429` beyond), validate the body, authorise
//! the project, find or create the conversation (`422` when it is full; a follow-up runs
//! under the conversation's own rojo, `409` for another one named), take its run lease
//! (`409` while another run writes there), then start an agent run and stream its events as
//! NDJSON. `"regenerate": true` or `"editLast": true` runs again from the conversation's last
//! user message, replacing it and everything after it (`replace`; `docs/api.md`).

use axum::{
    extract::{rejection::JsonRejection, State},
    http::StatusCode,
    response::Response,
    Json,
};
use rojos_agent::{context::Window, Placement, RunRequest};
use rojos_config::RojoConfig;
use rojos_conversations::{ConversationHead, ConversationId, Step};
use rojos_llm::user_message;
use rojos_project_storage::ProjectId;
use serde::Deserialize;
use serde_json::Value;

use super::{
    auth::Caller,
    error::ApiError,
    ndjson,
    opened::{Opened, SizeCheck},
    replace,
    stored::{self, internal, lease_for_run},
};
use crate::{
    providers::{choice, ProviderRef},
    state::AppState,
};

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ChatBody {
    project_id: String,
    rojo: Option<String>,
    conversation_id: Option<String>,
    message: Option<String>,
    /// Run again from the last user message (sent again as it is), dropping what followed.
    #[serde(default)]
    regenerate: bool,
    /// Replace the last user message by `message`, dropping what followed, and run.
    #[serde(default)]
    edit_last: bool,
}

pub(super) async fn chat(
    caller: Caller,
    State(state): State<AppState>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let permit = state.limits.admit(caller.token(), &state.metrics)?;
    let body = read_body(body, state.config.max_body_bytes)?;
    let project =
        ProjectId::parse(&body.project_id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    let mode = replace::Mode::of(body.regenerate, body.edit_last)?;
    // A malformed request is a 400 whether or not a provider is available.
    let conversation_id = body
        .conversation_id
        .as_deref()
        .map(ConversationId::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let message = replace::check_body(mode, body.message, conversation_id.is_some())?;
    let existing = match &conversation_id {
        Some(id) => Some(head_in_project(&state, &project, id).await?),
        None => None,
    };
    let rojo_name = rojo_of_run(body.rojo, existing.as_ref())?;
    let (rojo, provider, client, window) =
        rojo_and_provider(&state, &rojo_name)
            .await
            .map_err(|e| match (e, &existing) {
                (ApiError::BadRequest(_), Some(head)) => gone_rojo(head),
                (e, _) => e,
            })?;
    let opened = match (mode, existing) {
        (replace::Mode::Append, existing) => {
            let message = message.unwrap_or_default();
            let size = SizeCheck::new(&state, &message);
            let new = NewConversation {
                rojo: &rojo,
                client: &client,
                window,
                model: &provider.model,
            };
            open_conversation(&state, &project, &rojo_name, existing, &size, message, new).await?
        }
        (mode, Some(head)) => replace::open(&state, head, mode, message).await?,
        (_, None) => {
            return Err(ApiError::inconsistent(
                "check_body let a replace through without a conversation",
            ))
        }
    };
    let events = state.agent.start(
        RunRequest {
            project,
            rojo_name,
            rojo,
            provider,
            client,
            window,
            conversation: opened.id,
            history: opened.history,
            compaction: opened.compaction,
            history_bytes: opened.history_bytes,
            message: opened.message,
            placement: opened.placement,
            lease: opened.lease,
        },
        opened.first_turn,
        // The run, not its first client, holds the chat's admission.
        permit,
    );
    Ok(ndjson::response(events, state.metrics.open_stream()))
}

/// The body as a [`ChatBody`]: `413` past `max_body_bytes`, `400` for anything but a JSON
/// object with exactly the known keys.
fn read_body(
    body: Result<Json<Value>, JsonRejection>,
    max_body_bytes: usize,
) -> Result<ChatBody, ApiError> {
    let Json(body) = body.map_err(|rejection| json_error(rejection, max_body_bytes))?;
    // serde maps a JSON array onto a struct's fields by position: accept objects only.
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "invalid type: the body must be a JSON object".to_owned(),
        ));
    }
    serde_json::from_value(body).map_err(|e| ApiError::BadRequest(format!("invalid body: {e}")))
}

/// The rojo a message runs under: a new conversation's is the one the body names, or
/// `default`; an existing conversation's is the one it was started with (every conversation
/// stores it), whether the body names it or leaves it out: `409` when the body names another
/// (`docs/api.md`, "A conversation's rojo").
fn rojo_of_run(
    named: Option<String>,
    existing: Option<&ConversationHead>,
) -> Result<String, ApiError> {
    let Some(head) = existing else {
        return Ok(named.unwrap_or_else(|| "default".to_owned()));
    };
    match named {
        Some(named) if named != head.rojo => Err(ApiError::Conflict(format!(
            "conversation {} runs under rojo {:?}, not {named:?}: a conversation keeps the rojo \
             it was started with; leave \"rojo\" out (or send {:?}) to continue it, or start a \
             new conversation to use {named:?}",
            head.id, head.rojo, head.rojo
        ))),
        _ => Ok(head.rojo.clone()),
    }
}

/// The `422` for a conversation whose rojo is no longer configured.
fn gone_rojo(head: &ConversationHead) -> ApiError {
    ApiError::Unprocessable(format!(
        "conversation {} runs under rojo {:?}, which is no longer configured in rojos.toml; \
         start a new conversation (or configure that rojo again)",
        head.id, head.rojo
    ))
}

/// The rojo named `rojo_name`, the provider it uses now and that provider's client, from one
/// snapshot of the live settings (an edit of `rojos.toml` applies from the next message);
/// `400` for an unknown rojo, `503` with the fix when none of its providers is available
/// (see [`choice::for_chat`]), before any conversation is created.
async fn rojo_and_provider(
    state: &AppState,
    rojo_name: &str,
) -> Result<(RojoConfig, ProviderRef, rojos_llm::Client, Window), ApiError> {
    let settings = state.live.settings();
    let rojo = settings
        .rojo(rojo_name)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let chosen = choice::for_chat(&state.statuses, &settings, rojo_name, rojo)
        .await
        .map_err(ApiError::Unavailable)?;
    let window = window_of(state, &settings, rojo, &chosen.provider, &chosen.client).await;
    Ok((rojo.clone(), chosen.provider, chosen.client, window))
}

/// The context window of `rojo`'s model on `provider` (`docs/configuration.md`, "Context
/// window"): the server is asked unless a configured window applies (and for Ollama always:
/// what it loaded bounds a configured one), within
/// [`ASK_LIMIT`](crate::providers::window::ASK_LIMIT).
pub(super) async fn window_of(
    state: &AppState,
    settings: &crate::live::Settings,
    rojo: &RojoConfig,
    provider: &ProviderRef,
    client: &rojos_llm::Client,
) -> Window {
    let configured = settings
        .providers
        .get(&provider.name)
        .and_then(|p| p.config.context_tokens);
    let ollama = provider.kind == Some(rojos_llm::ProviderKind::Ollama);
    let reported = if ollama || (rojo.context_tokens.is_none() && configured.is_none()) {
        state.agent.windows.lookup(provider, client, false).await
    } else {
        None
    };
    let window = Window::resolve(
        rojo.context_tokens,
        configured,
        reported.as_ref().map(|r| (r.tokens, r.loaded)),
        &client.provider().model,
        ollama,
    );
    if let Some(told) = reported.filter(|r| r.tokens == window.tokens) {
        if rojo
            .context_tokens
            .or(configured)
            .is_some_and(|c| c > told.tokens)
        {
            tracing::info!(
                provider = %provider.name,
                context_tokens = rojo.context_tokens.or(configured),
                loaded = told.tokens,
                "Ollama loaded the model with a smaller context than `context_tokens` says; \
                 planning for what it loaded (to load more, see docs/configuration.md, \
                 \"Context window\")"
            );
        }
    }
    window
}

/// What a new conversation's first model turn is asked with (see [`open_conversation`]).
pub(super) struct NewConversation<'a> {
    pub(super) rojo: &'a RojoConfig,
    pub(super) client: &'a rojos_llm::Client,
    /// The model's window, and the model.
    pub(super) window: Window,
    pub(super) model: &'a str,
}

/// The conversation `message` continues (`existing`: its head, read by
/// [`head_in_project`]), its history, and the run's lease on it. Without one, a new
/// conversation is created holding the message, in one write, while its first model request
/// (`new`) is on its way ([`rojos_agent::FirstTurn`]).
///
/// # Errors
///
/// `404`/`403` for an unknown conversation or one of another project, `422` when it is full,
/// `409` when a run is in progress in it.
pub(super) async fn open_conversation(
    state: &AppState,
    project: &ProjectId,
    rojo_name: &str,
    existing: Option<ConversationHead>,
    size: &SizeCheck,
    message: String,
    new: NewConversation<'_>,
) -> Result<Opened, ApiError> {
    let store = &state.agent.store;
    let Some(head) = existing else {
        size.check(0)?;
        // The message the run would store first (`Placement::Created`).
        let first = Step::new(&[user_message(&message)]).map_err(internal)?;
        let history_bytes = first.bytes();
        let create = async {
            let id = store
                .create_with(project.as_str(), rojo_name, first)
                .await
                .map_err(internal)?;
            // Nobody else knows the new id yet: its lease is always free.
            let lease = state
                .agent
                .lease(&id)
                .await
                .map_err(internal)?
                .ok_or_else(|| {
                    ApiError::inconsistent(format!("new conversation {id} already has a run lease"))
                })?;
            Ok::<_, ApiError>((id, lease))
        };
        // Dropped with the request when the create fails: the answer is the store's status.
        let mut first_turn = state.agent.first_turn(
            project,
            new.rojo,
            new.client,
            (new.window, new.model),
            &message,
        );
        let (id, lease) = match &mut first_turn {
            Some(turn) => turn.alongside(create).await?,
            None => create.await?,
        };
        return Ok(Opened {
            id,
            history: Vec::new(),
            compaction: None,
            history_bytes,
            lease,
            message,
            placement: Placement::Created,
            first_turn,
        });
    };
    let id = head.id;
    // Refused before its messages are read: a full conversation may be large.
    size.check(head.stored_bytes)?;
    let lease = lease_for_run(state, &id, None).await?;
    // No run writes here while the lease is held: this history is complete. Only what
    // the model can be sent is read: the messages after the newest summary, which stands
    // for those before (`docs/api.md`, "Long conversations").
    let resumed = store
        .resume(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
    // A run that ended since the first check may have filled it.
    size.check(resumed.head.stored_bytes)?;
    Ok(Opened {
        id,
        history: resumed.messages,
        compaction: resumed.compaction,
        history_bytes: usize::try_from(resumed.head.stored_bytes).unwrap_or(usize::MAX),
        lease,
        message,
        placement: Placement::Append,
        first_turn: None,
    })
}

/// The head of conversation `id`, which a chat in `project` continues: `404` when there is
/// none, `403` when it belongs to another project.
pub(super) async fn head_in_project(
    state: &AppState,
    project: &ProjectId,
    id: &ConversationId,
) -> Result<ConversationHead, ApiError> {
    let head = stored::head(state, id).await?;
    if head.project_id != project.as_str() {
        return Err(ApiError::Forbidden(format!(
            "conversation {id} belongs to another project"
        )));
    }
    Ok(head)
}

fn json_error(rejection: JsonRejection, limit: usize) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(limit)
    } else {
        ApiError::BadRequest(rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(rojo: &str) -> ConversationHead {
        ConversationHead {
            id: ConversationId::parse("c1").unwrap(),
            project_id: "demo".into(),
            rojo: rojo.into(),
            message_count: 1,
            stored_bytes: 10,
            rojo_kept_from: 0,
        }
    }

    #[test]
    fn a_follow_up_runs_under_its_conversations_rojo_whatever_the_body_leaves_out() {
        assert_eq!(rojo_of_run(None, None).unwrap(), "default");
        assert_eq!(rojo_of_run(Some("x".into()), None).unwrap(), "x");
        let careful = head("careful");
        assert_eq!(rojo_of_run(None, Some(&careful)).unwrap(), "careful");
        assert_eq!(
            rojo_of_run(Some("careful".into()), Some(&careful)).unwrap(),
            "careful"
        );
        let refused = rojo_of_run(Some("default".into()), Some(&careful)).unwrap_err();
        assert!(matches!(refused, ApiError::Conflict(_)), "{refused}");
        assert!(
            refused.to_string().contains("runs under rojo \"careful\""),
            "{refused}"
        );
    }
}
