//! A model turn's tool calls, run in the order given ([`Run::tool_calls`]), each between its
//! `TOOL_CALL` and `TOOL_RESULT` events ([`Run::tool_call`]).

use std::time::Instant;

use rojos_llm::{tool_message, ToolCall, Turn};
use rojos_plugin_host::{model_text, CallRequest, FailureKind, ToolFailure};
use serde_json::Value;
use tracing::Instrument;

use super::Run;
use crate::registry::Registry;
use crate::{approval, dispatch, Event};

impl Run<'_> {
    /// Runs `turn`'s tool calls in the order given; returns their `tool` messages, after the
    /// turn's assistant message. Once the run is cancelled, the calls left are not run: each
    /// gets a message saying so.
    pub(super) async fn tool_calls(
        &mut self,
        registry: &Registry,
        turn: &Turn,
        calls: &CallRequest,
    ) -> Vec<Value> {
        let mut messages = vec![self.request.client.assistant_message(turn)];
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
                let tool_call = Box::pin(self.tool_call(registry, call, calls));
                messages.push(tool_call.await);
            }
        }
        messages
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
}
