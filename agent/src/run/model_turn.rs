//! [`Run::model_turn`]: one model turn streamed to the client, its request's step stored on
//! the way, and a failed turn logged with what to tell the user.

use std::time::Instant;

use rojos_conversations::Step;
use rojos_llm::TurnEvent;

use super::out::next_or_cancelled;
use super::turn::{Answered, Sent, TurnEnd, TurnOut};
use super::Run;
use crate::providers::advice;
use crate::{error_chain, progress::ProgressThrottle, Event};

impl Run<'_> {
    /// Streams one model turn to the client. `unsaved`, the step the request ends with, is
    /// stored while the request is on its way: a provider takes far longer to its first
    /// token than the store to commit, and nothing of the turn is passed on (or kept) before
    /// the step is stored.
    ///
    /// `hold`: the turn's text and live status are kept back, to be passed on or dropped once
    /// its usage shows whether the provider cut the request ([`Run::cut_silently`]).
    pub(super) async fn model_turn(
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
                    metrics.provider_error(rojos_metrics::NO_RESULT);
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
    pub(super) fn turn_failed(&self, error: &rojos_llm::LlmError, partial: String) -> TurnEnd {
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
}
