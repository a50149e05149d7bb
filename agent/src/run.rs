//! The step loop of one run: stream a model turn (text goes to the client as it arrives),
//! run its tool calls in the order given, store the assistant message with its tool messages
//! (while the next turn's request is on its way; nothing of that turn is passed on before),
//! and go again until the model answers in text, the step limit is reached, the
//! conversation reaches its size limit, the provider fails or the client goes away. Whatever
//! ends the run, the stored history stays one every provider accepts, and `DONE` comes last.
//!
//! Its parts, under `run/`: `fitted` (the next request fitted into the window), `model_turn`
//! (one turn streamed) with its types in `turn`, `silent_cut` (a provider that cut the request
//! without a word), `tool_calls`, `ending` (an answer stored, or a failure reported and the
//! history closed), and `out` (the client side: the run's feed and its stop).

use std::sync::Arc;

use rojos_conversations::{Step, StoreError};
use rojos_llm::{assistant_text_message, user_message, MessageText, Turn};
use rojos_plugin_host::CallRequest;
use serde_json::Value;
use tracing::Instrument;

use super::feed::Feed;
use super::{
    context, dispatch, history, Agent, Event, FirstTurn, Placement, RunRequest, StopReason,
};
use crate::registry::Registry;

/// The closing message stored before a new user message when the run before it ended
/// without closing the history.
pub const INTERRUPTED: &str = "(no answer: the run was interrupted)";

mod ending;
mod fitted;
mod model_turn;
mod out;
mod silent_cut;
mod tool_calls;
mod turn;

use out::Out;
use turn::{Sent, TurnEnd};

/// Runs one user message to its end and sends `DONE`; stops early once nobody has followed
/// it for `[limits] unattended_run_secs` (see [`Feed::stop_when_unattended`]).
pub(super) async fn run(
    agent: Arc<Agent>,
    mut request: RunRequest,
    first_turn: Option<FirstTurn>,
    feed: Arc<Feed>,
) {
    let span = tracing::info_span!(
        "chat",
        project_id = %request.project,
        rojo = %request.rojo_name,
        conversation_id = %request.conversation,
    );
    async move {
        agent.metrics.chat_started();
        let out = Out {
            feed: Arc::clone(&feed),
            // The server's shutdown, the run's lease lost, a stop asked, or nobody following.
            shutdown: feed.stop_token(),
        };
        // The run's history is the request's, taken and written as JSON once: nothing else
        // reads it.
        let history = Arc::new(history::as_sent(std::mem::take(&mut request.history)));
        let checkpoint = agent.checkpoints.run(
            request.project.clone(),
            request.conversation.clone(),
            user_message_index(&request, &history),
        );
        let window = request.window;
        tracing::info!(
            context_tokens = window.tokens,
            context_source = window.source.name(),
            compact_at_percent = request.rojo.compact_at_percent,
            "context window"
        );
        // The stored messages before the history: the summary loaded with it stands for them.
        let offset = request.compaction.as_ref().map_or(0, |c| c.covers as usize);
        let mut fit = context::Fit::new(
            window,
            user_message_index(&request, &history) as usize - offset,
            &request.provider.model,
        );
        fit.offset = offset;
        if let Some(kept) = request.compaction.take() {
            fit.summary = Some(Some(kept));
        }
        // The server said it loaded the model with as much as is planned for.
        fit.confirmed |= agent
            .windows
            .known(&request.provider, &request.client)
            .is_some_and(|r| r.loaded && r.tokens >= window.tokens);
        let mut run = Run {
            agent: &agent,
            fit,
            history,
            // The store's count; each message stored by this run adds its own size.
            history_bytes: request.history_bytes,
            request: &request,
            out: &out,
            ledger: dispatch::Ledger::new(agent.budgets).with_checkpoint(checkpoint),
        };
        let steps = run.steps(first_turn);
        let unattended = async {
            feed.stop_when_unattended(agent.feeds.unattended).await;
            std::future::pending::<()>().await;
        };
        let result = tokio::select! {
            result = steps => result,
            () = unattended => unreachable!("never resolves"),
        };
        let stop = match result {
            Ok(stop) => stop,
            Err(e) => {
                tracing::error!(error = %e, "conversation store failed");
                out.send(Event::Error {
                    message: format!("the conversation could not be saved: {e}"),
                })
                .await;
                StopReason::InternalError
            }
        };
        tracing::info!(stop_reason = ?stop, "chat finished");
        agent.metrics.chat_finished(stop.as_str());
        // The history is closed: the next message may start a run before `DONE` arrives.
        request.lease.release().await;
        out.send(Event::Done {
            conversation_id: request.conversation.to_string(),
            stop_reason: stop,
        })
        .await;
    }
    .instrument(span)
    .await;
}

/// Where the run's user message lands in the stored history (after the closing message an
/// interrupted run needs, see [`Run::steps`]): the run's position for its undo checkpoint,
/// counted from the first stored message. `history` is the request's, as sent.
fn user_message_index(request: &RunRequest, history: &[MessageText]) -> u64 {
    let kept = match request.placement {
        Placement::ReplaceFrom(from) => from,
        Placement::Append | Placement::Created => {
            request.compaction.as_ref().map_or(0, |c| c.covers) + history.len() as u64
        }
    };
    kept + u64::from(history::needs_closing(history))
}

struct Run<'a> {
    agent: &'a Agent,
    request: &'a RunRequest,
    out: &'a Out,
    /// The history as the provider gets it, shared with a model turn's stream while the turn
    /// runs; it grows only between turns ([`Run::extend_history`]).
    history: Arc<Vec<MessageText>>,
    /// The stored size of the conversation, notes included ([`Step::bytes`]).
    history_bytes: usize,
    /// Earlier calls and what is left of the run's budgets.
    ledger: dispatch::Ledger,
    /// How requests are fitted into the model's context window.
    fit: context::Fit,
}

impl Run<'_> {
    /// The run, step by step: its user message placed in the history, then model turns and
    /// their tool calls until the model answers in text or something ends the run.
    /// `first_turn`: the first model turn, when it was sent before the run
    /// ([`Agent::first_turn`]).
    async fn steps(&mut self, mut first_turn: Option<FirstTurn>) -> Result<StopReason, StoreError> {
        // A step in the history but not yet stored: stored while the next model turn's request
        // is on its way (`model_turn`), or before the run ends otherwise.
        let mut unsaved = self.place_message(&mut first_turn).await?;
        let calls = match self.call_request(first_turn.as_ref()) {
            Ok(calls) => calls,
            Err(e) => {
                tracing::error!(error = %e, "cannot open the project folder");
                self.save_unsaved(&mut unsaved).await?;
                return self
                    .fail(
                        StopReason::InternalError,
                        "the project folder cannot be opened",
                        String::new(),
                    )
                    .await;
            }
        };
        let max_steps = self.request.rojo.max_steps.get();
        for step in 1..=max_steps {
            if self.history_bytes > self.agent.budgets.max_conversation_bytes {
                self.save_unsaved(&mut unsaved).await?;
                return self.conversation_full().await;
            }
            let last = step == max_steps;
            let asked = self
                .ask_model(last, &mut first_turn, &mut unsaved)
                .instrument(tracing::info_span!("step", n = step))
                .await?;
            let (registry, turn) = match asked {
                Ok(answered) => answered,
                Err(stop) => return Ok(stop),
            };
            if !turn.wants_tools() || last {
                return self.answer(turn, last && step > 1).await;
            }
            let messages = self.tool_calls(&registry, &turn, &calls).await;
            let step = self.remember(messages)?;
            if self.out.is_cancelled() {
                self.save(step).await?;
                return self.cancelled(String::new()).await;
            }
            unsaved = Some(step);
        }
        unreachable!("the last step always returns")
    }

    /// Puts the run's user message in the history, as its placement says; returns the step
    /// left to store with the next model turn's request, if any. `first_turn` is only read
    /// (a future holding a `&FirstTurn` would not be `Send`: its stream is not `Sync`).
    async fn place_message(
        &mut self,
        first_turn: &mut Option<FirstTurn>,
    ) -> Result<Option<Step>, StoreError> {
        let mut first = Vec::with_capacity(2);
        // A run that could not close the history (its host was killed mid-run, or the
        // database went away) left it on a user or tool message: closed here, in the same
        // step as the new message, so it stays one every provider accepts.
        if history::needs_closing(&self.history) {
            first.push(assistant_text_message(INTERRUPTED));
        }
        first.push(user_message(&self.request.message));
        match self.request.placement {
            Placement::Append => return Ok(Some(self.remember(first)?)),
            // Stored with the conversation, and counted in `history_bytes`, by the write that
            // created it: `first` is the same message (a new conversation has no history to
            // close). A first turn sent already was made of that same history: it is taken.
            Placement::Created => match first_turn {
                Some(turn) => {
                    debug_assert_eq!(
                        *turn.history,
                        history::as_sent(first.clone()),
                        "the first turn's history"
                    );
                    self.history = Arc::clone(&turn.history);
                    // Its usage is judged against what it sent, as any later turn's.
                    self.fit.last_sent = turn.bytes;
                    self.fit.last_tokens = turn.tokens;
                }
                None => self.extend_history(history::as_sent(first)),
            },
            // The dropped messages and this step go together: if storing fails, nothing is
            // dropped (`ConversationStore::replace_from`).
            Placement::ReplaceFrom(from) => {
                let (step, sent) = history::written(&first)?;
                let bytes = step.bytes();
                self.agent
                    .store
                    .replace_from(&self.request.conversation, from, step)
                    .await?;
                self.history_bytes += bytes;
                self.extend_history(sent);
            }
        }
        Ok(None)
    }

    /// What every tool call of the run needs besides its tool: the project's root (the one
    /// the first turn opened, when there was one), limits, deadline, the run's stop.
    fn call_request(&self, first_turn: Option<&FirstTurn>) -> std::io::Result<CallRequest> {
        let root = match first_turn {
            Some(turn) => Arc::clone(&turn.root),
            None => Arc::new(self.agent.storage.project_root(&self.request.project)?),
        };
        Ok(CallRequest {
            project_id: self.request.project.to_string(),
            root,
            root_path: self.agent.storage.project_root_path(&self.request.project),
            limits: self.agent.limits,
            timeout: self.agent.call_timeout,
            create_only: Vec::new(),
            stop: self.out.shutdown.clone(),
        })
    }

    /// One model turn, with the tools offered at its start: fitted into the window and
    /// streamed; asked once more when the provider said it overflowed or cut it silently.
    /// `Err` is how the run ended instead (reported, and the history closed).
    async fn ask_model(
        &mut self,
        last: bool,
        first_turn: &mut Option<FirstTurn>,
        unsaved: &mut Option<Step>,
    ) -> Result<Result<(Arc<Registry>, Turn), StopReason>, StoreError> {
        let rojo = &self.request.rojo;
        let client = &self.request.client;
        let mut overflowed = false;
        let mut cut_retried = false;
        loop {
            // One registry snapshot per model turn: a reload never changes tools mid-turn.
            let (registry, sent) = match first_turn.take() {
                Some(turn) => (
                    turn.registry,
                    Sent::before_the_run(turn.stream, turn.ahead, turn.started),
                ),
                None => {
                    let registry = self.agent.registry.snapshot();
                    let tools = registry.offered(&rojo.tools);
                    let request = match self.fitted(tools, last, unsaved).await? {
                        Ok(request) => request,
                        Err(stop) => return Ok(Err(stop)),
                    };
                    (registry, Sent::now(client.stream_shared(request)))
                }
            };
            let hold = self.holds_turns();
            match self.model_turn(sent, unsaved.take(), hold).await {
                Ok(answered) => {
                    let cut = self.cut_silently(&answered.turn).await;
                    // Cut without a word: its answer was made without the front of the
                    // request. Fitted to the window really loaded, the turn is asked once
                    // more, unless its text was shown already.
                    if cut && !cut_retried && !answered.out.shown_text {
                        cut_retried = true;
                        let message = self.cut_message(true);
                        self.out.send(Event::Warning { message }).await;
                        continue;
                    }
                    answered.out.release(self.out).await;
                    if cut {
                        let message = self.cut_message(false);
                        self.out.send(Event::Warning { message }).await;
                    }
                    return Ok(Ok((registry, answered.turn)));
                }
                Err(TurnEnd::Unsaved(e)) => return Err(e),
                Err(TurnEnd::Cancelled { partial }) => {
                    return self.cancelled(partial).await.map(Err)
                }
                // The provider's own overflow error: the window is smaller than planned for.
                // Fitted again to a smaller one, the turn is tried once more.
                Err(TurnEnd::Failed {
                    overflow: true,
                    partial,
                    ..
                }) if !overflowed && partial.is_empty() && self.fit.enabled(rojo) => {
                    overflowed = true;
                    self.fit.overflowed(&self.request.provider.model);
                }
                Err(TurnEnd::Failed {
                    message, partial, ..
                }) => {
                    return self
                        .fail(StopReason::ProviderError, &message, partial)
                        .await
                        .map(Err);
                }
            }
        }
    }

    /// Stores one step's messages together (notes included) and adds them to the history sent
    /// upstream.
    async fn store(&mut self, messages: Vec<Value>) -> Result<(), StoreError> {
        // Remembered first: a step that cannot be stored ends the run, history and all.
        let step = self.remember(messages)?;
        self.save(step).await
    }

    /// Adds one step's messages to the history sent upstream (without their notes: an
    /// approval's, a closing message's) and counts their stored size.
    ///
    /// The step returned is what the store writes: the messages with their notes, as text.
    /// Each message is written as JSON once, here, for the store and the history alike
    /// ([`history::written`]).
    fn remember(&mut self, messages: Vec<Value>) -> Result<Step, StoreError> {
        let (step, sent) = history::written(&messages)?;
        self.history_bytes += step.bytes();
        self.extend_history(sent);
        Ok(step)
    }

    /// Adds messages to the history. Between model turns, when no turn's stream shares it, so
    /// nothing is copied (`Arc::make_mut` would copy a history still shared).
    fn extend_history(&mut self, messages: Vec<MessageText>) {
        debug_assert_eq!(
            Arc::strong_count(&self.history),
            1,
            "a model turn's stream still shares the history"
        );
        Arc::make_mut(&mut self.history).extend(messages);
    }

    /// Stores one step's messages together, already in the history ([`Run::remember`]).
    async fn save(&self, step: Step) -> Result<(), StoreError> {
        self.agent
            .store
            .append_step(&self.request.conversation, step)
            .await
    }

    /// Stores the step left unsaved, if there is one.
    async fn save_unsaved(&self, unsaved: &mut Option<Step>) -> Result<(), StoreError> {
        match unsaved.take() {
            Some(step) => self.save(step).await,
            None => Ok(()),
        }
    }
}
