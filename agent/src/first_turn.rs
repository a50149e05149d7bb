//! [`FirstTurn`]: a new conversation's first model request, sent while the conversation is
//! created. A provider takes far longer to its first token than the store to commit, so the
//! request goes out first and the create and the run lease are awaited alongside it
//! ([`FirstTurn::alongside`]); the run then continues that same turn. Nothing of the turn is
//! passed on before the conversation is stored and `POST /chat` has answered `200`: a create
//! that fails still answers with its status, and dropping the turn drops the request.
//! The request goes out early only when it fits the model's window as it is (`context`): a
//! message that must be shortened or cut to fit is left to the run, which fits it as it
//! fits every later turn; the size sent is the run's, so the provider's usage (an overflow,
//! a silent cut) is judged against it. docs/api.md, "The stored history".

use std::{future::Future, sync::Arc, time::Instant};

use cap_std::fs::Dir;
use futures_util::StreamExt;
use rojos_llm::{user_message, LlmError, MessageText, ToolDefinition, TurnEvent, TurnStream};
use rojos_project_storage::ProjectId;

use super::context::{self, Measure, Window};
use super::{history, Agent};
use crate::{registry::Registry, rojo::RojoConfig};

/// A model turn started before its run, with what the run needs to continue it.
pub struct FirstTurn {
    /// The project's root, opened before the request was sent.
    pub(super) root: Arc<Dir>,
    /// The registry snapshot the request offered tools from: the turn's calls run on it.
    pub(super) registry: Arc<Registry>,
    /// The history the request was made of (the user message), shared with the stream.
    pub(super) history: Arc<Vec<MessageText>>,
    /// The turn's stream.
    pub(super) stream: TurnStream,
    /// Its first item, when it came before the conversation was created.
    pub(super) ahead: Option<Option<Result<TurnEvent, LlmError>>>,
    /// When the request was sent.
    pub(super) started: Instant,
    /// The request's size as the run's measure estimates it: its bytes and tokens (both 0
    /// when the rojo does not fit requests).
    pub(super) bytes: usize,
    pub(super) tokens: u64,
}

impl std::fmt::Debug for FirstTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstTurn")
            .field("started", &self.started)
            .field("ahead", &self.ahead.is_some())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts the first model turn of a new conversation in `project` holding `message`,
    /// to `model`, whose window is `window`: `None` when the project's folder does not exist
    /// yet or cannot be opened (the run creates it, or reports why it cannot, before it asks
    /// the model), or when the request does not fit the window as it is (the run fits it).
    pub fn first_turn(
        &self,
        project: &ProjectId,
        rojo: &RojoConfig,
        client: &rojos_llm::Client,
        (window, model): (Window, &str),
        message: &str,
    ) -> Option<FirstTurn> {
        let root = self.storage.existing_project_root(project).ok()??;
        let registry = self.registry.snapshot();
        let history = Arc::new(vec![MessageText::new(&user_message(message))]);
        let last = rojo.max_steps.get() == 1;
        let tools = registry.offered(&rojo.tools);
        let (bytes, tokens) = if rojo.compact_at_percent > 0 {
            fits_whole(rojo, &history, &tools, window, model)?
        } else {
            (0, 0)
        };
        let request = history::request(rojo, &history, tools, last);
        Some(FirstTurn {
            root: Arc::new(root),
            registry,
            history,
            stream: client.stream_shared(request),
            ahead: None,
            started: Instant::now(),
            bytes,
            tokens,
        })
    }
}

/// The bytes and tokens of the request of `history` with `tools`, as the run measures
/// requests to `model`, when it is sent as it is (`context::plan`); `None` when it must be
/// shortened or cut to fit `window`.
fn fits_whole(
    rojo: &RojoConfig,
    history: &Arc<Vec<MessageText>>,
    tools: &[ToolDefinition],
    window: Window,
    model: &str,
) -> Option<(usize, u64)> {
    let tools_json = serde_json::to_string(tools).unwrap_or_default();
    let measure = Measure::for_model(model);
    let planned = context::plan(&context::Input {
        history,
        system: rojo.system_prompt.as_ref(),
        tools_bytes: tools_json.len(),
        tools_tokens: measure.tokenizer().map_or(0, |t| t.tools(&tools_json)),
        summary: None,
        run_start: 0,
        offset: 0,
        window,
        percent: rojo.compact_at_percent,
        measure,
        may_compact: false,
    });
    match planned {
        context::Plan::Send(planned) if !planned.shortened => Some((planned.bytes, planned.tokens)),
        _ => None,
    }
}

impl FirstTurn {
    /// Awaits `work` while the turn's request goes out and its answer begins; an item that
    /// comes meanwhile is kept for the run.
    pub async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        if self.ahead.is_none() {
            tokio::select! {
                biased;
                done = &mut work => return done,
                item = self.stream.next() => self.ahead = Some(item),
            }
        }
        work.await
    }
}
