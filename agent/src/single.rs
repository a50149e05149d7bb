//! One tool call outside a chat, for callers that are not a model turn (the MCP server,
//! `docs/mcp.md`): it goes through the very path a chat's tool call takes ([`dispatch`]:
//! the same checks, plugin invocation, time-out, per-result cap and metrics), with a ledger
//! and budgets of its own, so no call counts against another.

use std::{sync::Arc, time::Instant};

use rojos_llm::ToolCall;
use rojos_metrics::{Metrics, UNKNOWN_TOOL};
use rojos_plugin_host::CallRequest;
use rojos_project_storage::ProjectId;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::{approval, dispatch, Agent};
use crate::rojo::{ApprovalRule, ToolSelection};

/// The id the single call carries where a chat would carry the model's call id; it shows
/// only in logs.
const SINGLE_CALL_ID: &str = "single";

/// What one call gave: the text the model would see (`error: why` when it failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleCallResult {
    /// The result text, cut to `max_result_bytes`.
    pub text: String,
    /// Whether the tool ran and succeeded.
    pub ok: bool,
}

/// Why a single call could not even be attempted.
#[derive(Debug, thiserror::Error)]
pub enum SingleCallError {
    /// The project's folder cannot be opened (or created).
    #[error("the project folder cannot be opened")]
    ProjectFolder(#[source] std::io::Error),
}

impl Agent {
    /// Runs the tool `name` with `arguments` on `project`, if `enabled` allows it and
    /// `approve` does not ask for the user's approval (nobody can give it here), exactly as
    /// a chat's tool call would run; refusals and failures come back as a result with
    /// `ok: false`, worded as the model would read them.
    ///
    /// # Errors
    ///
    /// [`SingleCallError::ProjectFolder`] when the project's folder cannot be opened.
    pub async fn call_tool(
        &self,
        project: &ProjectId,
        enabled: &ToolSelection,
        approve: &ApprovalRule,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<SingleCallResult, SingleCallError> {
        let root = self
            .storage
            .project_root(project)
            .map_err(SingleCallError::ProjectFolder)?;
        let request = CallRequest {
            project_id: project.to_string(),
            root: Arc::new(root),
            root_path: self.storage.project_root_path(project),
            limits: self.limits,
            timeout: self.call_timeout,
            create_only: Vec::new(),
            stop: Default::default(),
        };
        let call = ToolCall {
            id: SINGLE_CALL_ID.to_owned(),
            name: name.to_owned(),
            // Shown only for arguments that failed to parse, which parsed ones cannot.
            raw_arguments: String::new(),
            arguments: Ok(arguments),
            extra: None,
        };
        let registry = self.registry.snapshot();
        let mut ledger = dispatch::Ledger::new(self.budgets)
            .with_project_lock(std::sync::Arc::clone(&self.checkpoints), project.clone());
        let span = tracing::info_span!("tool", name = %name, project_id = %project);
        let started = Instant::now();
        let tool = registry.get(name).map_or(UNKNOWN_TOOL, |_| name);
        let unsettled = CancelledIfDropped {
            metrics: &self.metrics,
            tool,
            started,
        };
        let settled = dispatch::run_call(
            &registry,
            enabled,
            &mut ledger,
            &call,
            &request,
            self.max_result_bytes,
            &mut approval::NobodyToAsk { rule: approve },
        )
        .instrument(span)
        .await;
        unsettled.disarm();
        settled.count(&self.metrics, started.elapsed());
        Ok(SingleCallResult {
            ok: settled.ok(),
            text: settled.text,
        })
    }
}

/// Counts a call as `cancelled` when its future is dropped before it settles (the caller
/// stopped waiting: an MCP client's `notifications/cancelled`); a settled call is counted by
/// its outcome instead, and forgets this guard.
struct CancelledIfDropped<'a> {
    metrics: &'a Metrics,
    tool: &'a str,
    started: Instant,
}

impl CancelledIfDropped<'_> {
    /// The call settled: it is counted by its outcome, not here.
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for CancelledIfDropped<'_> {
    fn drop(&mut self) {
        self.metrics
            .tool_call_cancelled(self.tool, self.started.elapsed());
    }
}
