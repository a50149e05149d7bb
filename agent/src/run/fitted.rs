//! [`Run::fitted`]: the request for the next model turn, fitted into the model's context
//! window (`super::context`): shortened, or sent after older turns were summarised, or the
//! run ends with an `ERROR` saying why nothing fits.

use rojos_conversations::{Compaction, Step, StoreError};
use rojos_llm::{SharedChatRequest, ToolChoice, ToolDefinition};

use super::Run;
use crate::providers::advice;
use crate::{context, history, Event, StopReason};

/// How a fitted request was made, or why the run ended instead.
type Fitted = Result<SharedChatRequest, StopReason>;

impl Run<'_> {
    /// The request for the next turn. `unsaved` is stored first when a summary is made (a
    /// summary covers stored messages only).
    pub(super) async fn fitted(
        &mut self,
        tools: Vec<ToolDefinition>,
        last: bool,
        unsaved: &mut Option<Step>,
    ) -> Result<Fitted, StoreError> {
        let rojo = &self.request.rojo;
        if !self.fit.enabled(rojo) {
            return Ok(Ok(history::request(rojo, &self.history, tools, last)));
        }
        let tools_json = serde_json::to_string(&tools).unwrap_or_default();
        let tools_tokens = self
            .fit
            .measure
            .tokenizer()
            .map_or(0, |t| t.tools(&tools_json));
        let mut may_compact = true;
        loop {
            let summary = self.fit.summary.clone().flatten();
            let plan = context::plan(&context::Input {
                history: &self.history,
                system: rojo.system_prompt.as_ref(),
                tools_bytes: tools_json.len(),
                tools_tokens,
                summary: summary.as_ref(),
                run_start: self.fit.run_start,
                offset: self.fit.offset,
                window: self.fit.window,
                percent: rojo.compact_at_percent,
                measure: self.fit.measure,
                may_compact,
            });
            match plan {
                // The whole history does not fit: the summary kept, if any, is read once.
                context::Plan::Send(planned) if planned.shortened && self.fit.summary.is_none() => {
                    drop(planned);
                    self.read_summary().await?;
                }
                context::Plan::Send(planned) => {
                    self.fit.last_sent = planned.bytes;
                    self.fit.last_tokens = planned.tokens;
                    if planned.shortened {
                        tracing::debug!(
                            bytes = planned.bytes,
                            messages = planned.messages.len(),
                            "request shortened to fit the context window"
                        );
                    }
                    return Ok(Ok(SharedChatRequest {
                        system: planned.system,
                        messages: planned.messages,
                        tools,
                        tool_choice: Some(if last {
                            ToolChoice::None
                        } else {
                            ToolChoice::Auto
                        }),
                    }));
                }
                context::Plan::Compact { .. } if self.fit.summary.is_none() => {
                    self.read_summary().await?;
                }
                context::Plan::Compact { upto } => {
                    self.save_unsaved(unsaved).await?;
                    if let Err(stop) = self.compact(summary, upto).await? {
                        return Ok(Err(stop));
                    }
                    may_compact = false;
                }
                context::Plan::TooBig { needed, limit } => {
                    self.save_unsaved(unsaved).await?;
                    let model = &self.request.provider.model;
                    let message = format!(
                        "the request cannot fit {model}'s context window of {} tokens ({}): \
                         the system prompt, the tool definitions and the newest messages \
                         alone take about {needed} of the {limit} left for them; give the \
                         model's real window with `context_tokens`, use a model with a larger \
                         one, or enable fewer tools",
                        self.fit.window.tokens,
                        self.fit.window.source.name()
                    );
                    return self
                        .fail(StopReason::LimitReached, &message, String::new())
                        .await
                        .map(Err);
                }
            }
        }
    }

    /// Reads the newest summary kept for the conversation.
    async fn read_summary(&mut self) -> Result<(), StoreError> {
        let kept = self
            .agent
            .store
            .compactions(&self.request.conversation)
            .await?;
        let newest = kept
            .into_iter()
            .rfind(|c| c.covers as usize <= self.fit.offset + self.history.len());
        self.fit.summary = Some(newest);
        Ok(())
    }

    /// Summarises the messages before `upto` (an index in the run's history; after
    /// `previous`'s), keeps the summary and tells the client; `Err` with the stop reason
    /// when the run ended instead.
    async fn compact(
        &mut self,
        previous: Option<Compaction>,
        upto: usize,
    ) -> Result<Result<(), StopReason>, StoreError> {
        // Stored indices count the messages before the run's history too.
        let offset = self.fit.offset;
        let previous = previous.filter(|c| (c.covers as usize) < offset + upto);
        let base = previous
            .as_ref()
            .map_or(0, |c| (c.covers as usize).saturating_sub(offset));
        let limit = self.fit.window.tokens - self.fit.window.answer_room();
        let part_bytes = self.fit.measure.bytes(limit) / 2;
        let provider = &self.request.provider;
        tracing::info!(
            from = base,
            upto,
            "summarising earlier messages to fit the context window"
        );
        let started = std::time::Instant::now();
        let summarised = {
            let work = context::summarise(
                &self.request.client,
                &provider.host,
                previous.as_ref().map(|c| c.summary.as_str()),
                &self.history[base..upto],
                part_bytes,
            );
            tokio::select! {
                biased;
                () = self.out.cancelled() => None,
                done = work => Some(done),
            }
        };
        let text = match summarised {
            None => return self.cancelled(String::new()).await.map(Err),
            Some(Ok(text)) if !text.trim().is_empty() => text,
            Some(result) => {
                let why = match &result {
                    Err(e) => advice::for_error(provider, e),
                    Ok(_) => "the model answered with an empty summary".to_owned(),
                };
                let message = format!(
                    "the earlier messages could not be summarised to fit {}'s context \
                     window: {why}",
                    provider.model
                );
                return self
                    .fail(StopReason::ProviderError, &message, String::new())
                    .await
                    .map(Err);
            }
        };
        tracing::info!(
            upto,
            summary_bytes = text.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "earlier messages summarised"
        );
        let compaction = Compaction {
            covers: (offset + upto) as u64,
            summary: text,
        };
        let conversation = &self.request.conversation;
        self.agent
            .store
            .save_compaction(conversation, &compaction)
            .await?;
        // Another host may have kept its own summary of the same messages first: that one
        // is the one every turn uses.
        self.read_summary().await?;
        let kept = self.fit.summary.clone().flatten().unwrap_or(compaction);
        self.out
            .send(Event::ContextCompacted {
                covers: kept.covers,
                summary: kept.summary.clone(),
            })
            .await;
        Ok(Ok(()))
    }
}
