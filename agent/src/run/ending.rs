//! How a run ends: a text answer stored ([`Run::answer`]), or a failure, a cancellation or a
//! full conversation reported and the history closed so it stays one every provider accepts
//! ([`Run::close`]).

use rojos_conversations::StoreError;
use rojos_llm::{assistant_text_message, Turn};

use super::Run;
use crate::{history, Event, StopCause, StopReason};

impl Run<'_> {
    /// Stores a text answer. On the last allowed step the model was asked to answer without
    /// tools; calls it made anyway are dropped, not run.
    pub(super) async fn answer(
        &mut self,
        mut turn: Turn,
        step_limit: bool,
    ) -> Result<StopReason, StoreError> {
        let ignored_calls = turn.tool_calls.len();
        turn.tool_calls.clear();
        let answer = self.request.client.assistant_message(&turn);
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

    /// Ends a run whose conversation is over `limits.max_conversation_bytes`: no further model
    /// turn would fit it.
    pub(super) async fn conversation_full(&mut self) -> Result<StopReason, StoreError> {
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
    pub(super) async fn cancelled(&mut self, partial: String) -> Result<StopReason, StoreError> {
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
    pub(super) async fn fail(
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
    pub(super) async fn close(
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
}
