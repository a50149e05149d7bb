//! [`FirstTurn`]: a new conversation's first model request, sent while the conversation is
//! created. A provider takes far longer to its first token than the store to commit, so the
//! request goes out first and the create and the run lease are awaited alongside it
//! ([`FirstTurn::alongside`]); the run then continues that same turn. Nothing of the turn is
//! passed on before the conversation is stored and `POST /chat` has answered `200`: a create
//! that fails still answers with its status, and dropping the turn drops the request.
//! docs/api.md, "The stored history".

use std::{future::Future, sync::Arc, time::Instant};

use cap_std::fs::Dir;
use futures_util::StreamExt;
use rojos_llm::{user_message, LlmError, MessageText, TurnEvent, TurnStream};

use super::{history, Agent};
use crate::{config::RojoConfig, registry::Registry, storage::ProjectId};

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
    /// Starts the first model turn of a new conversation in `project` holding `message`:
    /// `None` when the project's folder does not exist yet or cannot be opened (the run
    /// creates it, or reports why it cannot, before it asks the model).
    pub fn first_turn(
        &self,
        project: &ProjectId,
        rojo: &RojoConfig,
        client: &rojos_llm::Client,
        message: &str,
    ) -> Option<FirstTurn> {
        let root = self.storage.existing_project_root(project).ok()??;
        let registry = self.registry.snapshot();
        let history = Arc::new(vec![MessageText::new(&user_message(message))]);
        let last = rojo.max_steps.get() == 1;
        let request = history::request(rojo, &history, registry.offered(&rojo.tools), last);
        Some(FirstTurn {
            root: Arc::new(root),
            registry,
            history,
            stream: client.stream_shared(request),
            ahead: None,
            started: Instant::now(),
        })
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
