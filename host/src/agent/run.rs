//! The step loop of one run: stream a model turn (text goes to the client as it arrives),
//! run its tool calls in the order given, store the assistant message with its tool messages
//! (while the next turn's request is on its way; nothing of that turn is passed on before),
//! and go again until the model answers in text, the step limit is reached, the
//! conversation reaches its size limit, the provider fails or the client goes away. Whatever
//! ends the run, the stored history stays one every provider accepts, and `DONE` comes last.

use std::{sync::Arc, time::Instant};

use futures_util::StreamExt;
use rojos_conversations::{Step, StoreError};
use rojos_llm::{
    assistant_text_message, tool_message, user_message, MessageText, ToolCall, Turn, TurnEvent,
    TurnStream,
};
use serde_json::Value;
use tracing::Instrument;

use super::feed::Feed;
use super::progress::ProgressThrottle;
use super::{
    approval, context, dispatch, error_chain, history, Agent, Event, FirstTurn, Placement,
    RunRequest, StopCause, StopReason,
};
use crate::{
    plugins::{model_text, CallRequest, FailureKind, ToolFailure},
    providers::advice,
    registry::Registry,
};

/// The closing message stored before a new user message when the run before it ended
/// without closing the history.
pub(crate) const INTERRUPTED: &str = "(no answer: the run was interrupted)";

mod fitted;
mod silent_cut;

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

/// The client side of a run: events out to its feed, and whether the run must stop.
struct Out {
    feed: Arc<Feed>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Out {
    /// Adds an event to the run's feed, for every client that follows it.
    async fn send(&self, event: Event) {
        self.feed.push(&event);
    }

    /// Resolves when the run must stop: asked to, nobody follows it, the server shuts down,
    /// or the lease was lost.
    async fn cancelled(&self) {
        self.shutdown.cancelled().await;
    }

    fn is_cancelled(&self) -> bool {
        self.shutdown.is_cancelled()
    }
}

/// The stream's next item, or `None` once `cancelled` (the run's [`Out::cancelled`]) resolved:
/// the client is gone or the server shuts down.
async fn next_or_cancelled(
    stream: &mut TurnStream,
    cancelled: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Option<Option<Result<TurnEvent, rojos_llm::LlmError>>> {
    tokio::select! {
        biased;
        () = cancelled => None,
        item = stream.next() => Some(item),
    }
}

/// A model turn's request, sent: its stream, the stream's first item when it came while
/// something else was awaited, and when it was sent.
struct Sent {
    /// The stream writes each attempt's body from the run's history and the tools' shared
    /// definitions, and keeps no body between attempts: no copy of either is made or held
    /// for a turn. It shares the history until the turn ends, before the history grows.
    stream: TurnStream,
    /// `Some(None)`: the client went away or the server shuts down ([`next_or_cancelled`]).
    ahead: Option<Option<Option<Result<TurnEvent, rojos_llm::LlmError>>>>,
    started: Instant,
}

impl Sent {
    /// A request sent now.
    fn now(stream: TurnStream) -> Sent {
        Sent {
            stream,
            ahead: None,
            started: Instant::now(),
        }
    }

    /// The run's first turn, sent at `started`, before the run ([`FirstTurn`]).
    fn before_the_run(
        stream: TurnStream,
        ahead: Option<Option<Result<TurnEvent, rojos_llm::LlmError>>>,
        started: Instant,
    ) -> Sent {
        Sent {
            stream,
            ahead: ahead.map(Some),
            started,
        }
    }
}

/// How a model turn ended without a result.
enum TurnEnd {
    Cancelled {
        partial: String,
    },
    Failed {
        message: String,
        partial: String,
        /// The provider said the request is over the model's context window.
        overflow: bool,
    },
    /// The step stored alongside the turn's request could not be stored.
    Unsaved(StoreError),
}

/// A model turn that ended with its result.
struct Answered {
    turn: Turn,
    /// What became of its events.
    out: TurnOut,
}

/// A model turn's events on their way to the client: passed on as they come, or held back
/// until the turn is known whole ([`Run::model_turn`]).
struct TurnOut {
    hold: bool,
    held: Vec<Event>,
    /// Some of its text reached the client.
    shown_text: bool,
}

impl TurnOut {
    async fn pass(&mut self, out: &Out, event: Event) {
        if self.hold {
            self.held.push(event);
        } else {
            self.shown_text |= matches!(event, Event::Chat { .. });
            out.send(event).await;
        }
    }

    /// Passes on what was held.
    async fn release(self, out: &Out) {
        for event in self.held {
            out.send(event).await;
        }
    }
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
    /// `first_turn`: the first model turn, when it was sent before the run
    /// ([`Agent::first_turn`]).
    async fn steps(&mut self, mut first_turn: Option<FirstTurn>) -> Result<StopReason, StoreError> {
        let mut first = Vec::with_capacity(2);
        // A run that could not close the history (its host was killed mid-run, or the
        // database went away) left it on a user or tool message: closed here, in the same
        // step as the new message, so it stays one every provider accepts.
        if history::needs_closing(&self.history) {
            first.push(assistant_text_message(INTERRUPTED));
        }
        first.push(user_message(&self.request.message));
        // A step in the history but not yet stored: stored while the next model turn's request
        // is on its way (`model_turn`), or before the run ends otherwise.
        let mut unsaved = None;
        match self.request.placement {
            Placement::Append => {
                unsaved = Some(self.remember(first)?);
            }
            // Stored with the conversation, and counted in `history_bytes`, by the write that
            // created it: `first` is the same message (a new conversation has no history to
            // close). A first turn sent already was made of that same history: it is taken.
            Placement::Created => match &first_turn {
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
        let rojo = &self.request.rojo;
        let client = &self.request.client;
        let opened = match &first_turn {
            Some(turn) => Ok(Arc::clone(&turn.root)),
            None => self
                .agent
                .storage
                .project_root(&self.request.project)
                .map(Arc::new),
        };
        let root = match opened {
            Ok(root) => root,
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
        let calls = CallRequest {
            project_id: self.request.project.to_string(),
            root,
            root_path: self.agent.storage.project_root_path(&self.request.project),
            limits: self.agent.limits,
            timeout: self.agent.call_timeout,
            create_only: Vec::new(),
            stop: self.out.shutdown.clone(),
        };
        for step in 1..=rojo.max_steps.get() {
            if self.history_bytes > self.agent.budgets.max_conversation_bytes {
                self.save_unsaved(&mut unsaved).await?;
                return self.conversation_full().await;
            }
            let last = step == rojo.max_steps.get();
            let mut overflowed = false;
            let mut cut_retried = false;
            let turn = loop {
                // One registry snapshot per model turn: a reload never changes tools mid-turn.
                let (registry, sent) = match first_turn.take() {
                    Some(turn) => (
                        turn.registry,
                        Sent::before_the_run(turn.stream, turn.ahead, turn.started),
                    ),
                    None => {
                        let registry = self.agent.registry.snapshot();
                        let tools = registry.offered(&rojo.tools);
                        let request = match self.fitted(tools, last, &mut unsaved).await? {
                            Ok(request) => request,
                            Err(stop) => return Ok(stop),
                        };
                        (registry, Sent::now(client.stream_shared(request)))
                    }
                };
                let hold = self.holds_turns();
                match self
                    .model_turn(sent, unsaved.take(), hold)
                    .instrument(tracing::info_span!("step", n = step))
                    .await
                {
                    Ok(answered) => {
                        let cut = self.cut_silently(&answered.turn).await;
                        // Cut without a word: its answer was made without the front of the
                        // request. Fitted to the window really loaded, the turn is asked
                        // once more, unless its text was shown already.
                        if cut && !cut_retried && !answered.out.shown_text {
                            cut_retried = true;
                            self.out
                                .send(Event::Warning {
                                    message: self.cut_message(true),
                                })
                                .await;
                            continue;
                        }
                        answered.out.release(self.out).await;
                        if cut {
                            self.out
                                .send(Event::Warning {
                                    message: self.cut_message(false),
                                })
                                .await;
                        }
                        break (registry, answered.turn);
                    }
                    Err(TurnEnd::Unsaved(e)) => return Err(e),
                    Err(TurnEnd::Cancelled { partial }) => return self.cancelled(partial).await,
                    // The provider's own overflow error: the window is smaller than planned
                    // for. Fitted again to a smaller one, the turn is tried once more.
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
                            .await;
                    }
                }
            };
            let (registry, turn) = turn;
            if !turn.wants_tools() || last {
                return self.answer(client, turn, last && step > 1).await;
            }
            let mut messages = vec![client.assistant_message(&turn)];
            self.ledger.start_turn();
            for call in &turn.tool_calls {
                if self.out.is_cancelled() {
                    let not_run =
                        ToolFailure::new(FailureKind::Refused, "not run: the run was cancelled");
                    messages.push(tool_message(&call.id, model_text(Err(not_run))));
                } else {
                    // Boxed: a call's future (the approval gate, the plugin's thread, its
                    // deadline) is five times the size of a model turn's, and inline it
                    // would size every run's task for it, streaming or not.
                    let tool_call = Box::pin(self.tool_call(&registry, call, &calls));
                    messages.push(tool_call.await);
                }
            }
            let step = self.remember(messages)?;
            if self.out.is_cancelled() {
                self.save(step).await?;
                return self.cancelled(String::new()).await;
            }
            unsaved = Some(step);
        }
        unreachable!("the last step always returns")
    }

    /// Stores a text answer. On the last allowed step the model was asked to answer without
    /// tools; calls it made anyway are dropped, not run.
    async fn answer(
        &mut self,
        client: &rojos_llm::Client,
        mut turn: Turn,
        step_limit: bool,
    ) -> Result<StopReason, StoreError> {
        let ignored_calls = turn.tool_calls.len();
        turn.tool_calls.clear();
        let answer = client.assistant_message(&turn);
        if !step_limit && ignored_calls == 0 {
            self.store(vec![answer]).await?;
            return Ok(StopReason::Completed);
        }
        let max = self.request.rojo.max_steps;
        let mut message = format!(
            "step limit reached: {max} model turns; the model was asked to answer without tools"
        );
        if ignored_calls > 0 {
            message.push_str(&format!(
                " ({ignored_calls} further tool call(s) were not run)"
            ));
        }
        let ending = history::Ending::Error(message.clone());
        self.store(vec![history::with_note(answer, &ending, false)])
            .await?;
        self.out.send(Event::Error { message }).await;
        Ok(StopReason::MaxSteps)
    }

    /// Streams one model turn to the client. `unsaved`, the step the request ends with, is
    /// stored while the request is on its way: a provider takes far longer to its first
    /// token than the store to commit, and nothing of the turn is passed on (or kept) before
    /// the step is stored.
    ///
    /// `hold`: the turn's text and live status are kept back, to be passed on or dropped once
    /// its usage shows whether the provider cut the request ([`Run::cut_silently`]).
    async fn model_turn(
        &self,
        sent: Sent,
        unsaved: Option<Step>,
        hold: bool,
    ) -> Result<Answered, TurnEnd> {
        let metrics = &self.agent.metrics;
        metrics.model_turn_started();
        let Sent {
            mut stream,
            mut ahead,
            started,
        } = sent;
        // One watch for the whole turn: made per event, it registered with the event queue
        // and the stop token, and left them again, for every streamed chunk.
        let mut cancelled = std::pin::pin!(self.out.cancelled());
        if let Some(step) = unsaved {
            // Boxed: inline, the store's future would size every run's task.
            let save = Box::pin(self.save(step));
            let saved = if ahead.is_some() {
                save.await
            } else {
                let (saved, first) =
                    tokio::join!(save, next_or_cancelled(&mut stream, cancelled.as_mut()));
                ahead = Some(first);
                saved
            };
            if let Err(e) = saved {
                metrics.model_turn_ended(started.elapsed());
                return Err(TurnEnd::Unsaved(e));
            }
        }
        let mut partial = String::new();
        let mut progress = ProgressThrottle::default();
        let mut out = TurnOut {
            hold,
            held: Vec::new(),
            shown_text: false,
        };
        loop {
            let next = match ahead.take() {
                Some(next) => next,
                None => next_or_cancelled(&mut stream, cancelled.as_mut()).await,
            };
            let Some(item) = next else {
                out.release(self.out).await;
                return Err(TurnEnd::Cancelled { partial });
            };
            match item {
                Some(Ok(TurnEvent::TextDelta(text))) => {
                    partial.push_str(&text);
                    out.pass(self.out, Event::Chat { text }).await;
                }
                Some(Ok(TurnEvent::ToolCallStarted { index, id, name })) => {
                    progress.started(index, Instant::now());
                    let started = Event::ToolCallStarted { index, id, name };
                    out.pass(self.out, started).await;
                }
                Some(Ok(TurnEvent::ToolCallProgress { index, bytes })) => {
                    if progress.should_send(index, bytes, Instant::now()) {
                        out.pass(self.out, Event::ToolCallProgress { index, bytes })
                            .await;
                    }
                }
                Some(Ok(TurnEvent::Finished(turn))) => {
                    metrics.model_turn_ended(started.elapsed());
                    return Ok(Answered { turn, out });
                }
                Some(Err(error)) => {
                    metrics.model_turn_ended(started.elapsed());
                    metrics.provider_error(error.kind());
                    out.release(self.out).await;
                    return Err(self.turn_failed(&error, partial));
                }
                None => {
                    metrics.model_turn_ended(started.elapsed());
                    metrics.provider_error(crate::metrics::NO_RESULT);
                    let cut = rojos_llm::LlmError::StreamCut {
                        provider: self.request.provider.host.clone(),
                        source: None,
                    };
                    out.release(self.out).await;
                    return Err(self.turn_failed(&cut, partial));
                }
            }
        }
    }

    /// Logs a failed model turn with its technical chain; the user is told one sentence
    /// saying what failed and what to do (`providers::advice`).
    fn turn_failed(&self, error: &rojos_llm::LlmError, partial: String) -> TurnEnd {
        let provider = &self.request.provider;
        tracing::warn!(
            provider = %provider.name,
            kind = error.kind(),
            fault = ?error.fault(),
            error = %error_chain(error),
            "model turn failed"
        );
        TurnEnd::Failed {
            message: advice::for_error(provider, error),
            partial,
            overflow: error.fault() == rojos_llm::Fault::ContextTooLong,
        }
    }

    /// Runs one call between its `TOOL_CALL` and `TOOL_RESULT` events; returns its `tool` message.
    async fn tool_call(
        &mut self,
        registry: &Registry,
        call: &ToolCall,
        calls: &CallRequest,
    ) -> Value {
        let args = match &call.arguments {
            Ok(map) => Value::Object(map.clone()),
            Err(_) => Value::String(call.raw_arguments.clone()),
        };
        self.out
            .send(Event::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                args,
            })
            .await;
        let span = tracing::info_span!("tool", name = %call.name, call_id = %call.id);
        let started = Instant::now();
        let mut gate = approval::RunGate {
            desk: &self.agent.approvals,
            conversation: &self.request.conversation,
            rule: &self.request.rojo.approve,
            feed: &self.out.feed,
            stop: &self.out.shutdown,
            settled: None,
        };
        let settled = dispatch::run_call(
            registry,
            &self.request.rojo.tools,
            &mut self.ledger,
            call,
            calls,
            self.agent.max_result_bytes,
            &mut gate,
        )
        .instrument(span)
        .await;
        settled.count(&self.agent.metrics, started.elapsed());
        self.out
            .send(Event::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                result: settled.text.clone(),
                ok: settled.ok(),
            })
            .await;
        gate.annotate(tool_message(&call.id, settled.text))
    }

    /// Ends a run whose conversation is over `limits.max_conversation_bytes`: no further model
    /// turn would fit it.
    async fn conversation_full(&mut self) -> Result<StopReason, StoreError> {
        let max = self.agent.budgets.max_conversation_bytes;
        tracing::info!(
            stored_bytes = self.history_bytes,
            max,
            "conversation size limit reached"
        );
        let message = format!(
            "the conversation reached its size limit of {max} bytes \
             (limits.max_conversation_bytes); start a new conversation to continue"
        );
        self.fail(StopReason::LimitReached, &message, String::new())
            .await
    }

    /// Ends a cancelled run. Stopped by a client or for want of one, the history notes it as
    /// stopped; at shutdown or when the lease is lost, the clients are told why.
    async fn cancelled(&mut self, partial: String) -> Result<StopReason, StoreError> {
        let why = if self.agent.shutdown.is_cancelled() {
            "the server is shutting down"
        } else if let Some(cause) = self.out.feed.cause() {
            let why = match cause {
                StopCause::Asked => "the run was stopped",
                StopCause::Unattended => "the run was stopped: nobody followed it",
            };
            let stopped = history::Ending::Stopped;
            return self
                .close(StopReason::Cancelled, partial, why, stopped)
                .await;
        } else {
            "this run lost its hold on the conversation (its lease expired)"
        };
        let message = format!("{why}; the run was stopped");
        self.out
            .send(Event::Error {
                message: message.clone(),
            })
            .await;
        let ending = history::Ending::Error(message);
        self.close(StopReason::Cancelled, partial, why, ending)
            .await
    }

    /// Reports a failure, then closes the history.
    async fn fail(
        &mut self,
        stop: StopReason,
        message: &str,
        partial: String,
    ) -> Result<StopReason, StoreError> {
        self.out
            .send(Event::Error {
                message: message.to_owned(),
            })
            .await;
        let ending = history::Ending::Error(message.to_owned());
        self.close(stop, partial, message, ending).await
    }

    /// Ends the run so the stored history stays provider-valid: it must not end on a `user` or
    /// `tool` message (unanswered, or a `user` right after `tool`, which Mistral rejects). The
    /// closing message notes how the run ended (`ending`), for a reopened conversation to
    /// show it as the client saw it.
    async fn close(
        &mut self,
        stop: StopReason,
        partial: String,
        why: &str,
        ending: history::Ending,
    ) -> Result<StopReason, StoreError> {
        if history::needs_closing(&self.history) {
            let placeholder = partial.is_empty();
            let content = if placeholder {
                format!("(no answer: {why})")
            } else {
                partial
            };
            let message = assistant_text_message(&content);
            self.store(vec![history::with_note(message, &ending, placeholder)])
                .await?;
        }
        Ok(stop)
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
