//! What happens to one tool call the model made: a call past the turn's call limit,
//! malformed arguments, an unknown tool, a tool the rojo does not enable, arguments that do
//! not fit the tool's schema, a call repeating a
//! successful one of this run (compared in canonical form) or a call made once a result
//! budget is used up become error results the model sees, before the user is asked about
//! it (the gate); anything else runs through the
//! plugin or MCP server ([`RegisteredTool::invoke`]), and its text is cut to the per-result cap and the budgets.

use std::{collections::HashMap, time::Duration};

use rojos_checkpoints::{changed_paths, Change, Checkpoints, RunCheckpoint};
use rojos_llm::ToolCall;
use rojos_metrics::{Metrics, UNKNOWN_TOOL};
use rojos_plugin_host::{model_text, CallRequest, FailureKind, ToolArgs, ToolFailure};

use super::{
    budget::{Budget, Limit},
    canonical::canonical_args,
};
use crate::{
    registry::{RegisteredTool, Registry},
    rojo::ToolSelection,
    RunBudgets,
};

/// What a run remembers between its calls.
#[derive(Debug)]
pub(super) struct Ledger {
    /// Successful calls of this run (tool name + canonical arguments) and the id that made
    /// them. A failed call is not remembered, so it may be made again once its cause is
    /// fixed (e.g. after creating the missing folder).
    seen: HashMap<String, String>,
    /// What is left of the run's budgets.
    budget: Budget,
    /// A chat run's undo checkpoint (`None` outside a chat: the MCP server's calls).
    checkpoint: Option<RunCheckpoint>,
    /// Outside a chat: the project whose lock a changing call shares while it runs, so an
    /// undo does not check and restore meanwhile (docs/security.md).
    project_lock: Option<(
        std::sync::Arc<Checkpoints>,
        rojos_project_storage::ProjectId,
    )>,
}

impl Ledger {
    /// The ledger of a new run.
    pub(super) fn new(budgets: RunBudgets) -> Ledger {
        Ledger {
            seen: HashMap::new(),
            budget: Budget::new(budgets),
            checkpoint: None,
            project_lock: None,
        }
    }

    /// The ledger of calls outside a chat run whose changing calls share `project`'s lock.
    pub(super) fn with_project_lock(
        mut self,
        checkpoints: std::sync::Arc<Checkpoints>,
        project: rojos_project_storage::ProjectId,
    ) -> Ledger {
        self.project_lock = Some((checkpoints, project));
        self
    }

    /// The ledger of a chat run whose changing calls are recorded in `checkpoint`.
    pub(super) fn with_checkpoint(mut self, checkpoint: Option<RunCheckpoint>) -> Ledger {
        self.checkpoint = checkpoint;
        self
    }

    /// A new model turn: its call count and byte budget start again.
    pub(super) fn start_turn(&mut self) {
        self.budget.start_turn();
    }
}

/// Why the host did not run a call, as `rojos_tool_calls_refused_total` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// A budget refused it.
    Budget(Limit),
    /// It repeats a successful call of this run.
    Repeated,
}

impl Refused {
    /// The metric label.
    pub(super) fn label(self) -> &'static str {
        match self {
            Refused::Budget(limit) => limit.label(),
            Refused::Repeated => "repeated",
        }
    }
}

/// What the model is given for one call.
#[derive(Debug)]
pub(super) struct Settled<'r> {
    /// The loaded tool the call names (whether or not it ran), `None` for a name no loaded
    /// tool has: the metrics label.
    pub(super) tool: Option<&'r str>,
    /// The text (`error: why` when it failed), cut to the result cap and the budgets.
    pub(super) text: String,
    /// Why it failed; `None` when the tool ran and succeeded.
    pub(super) failure: Option<FailureKind>,
    /// Set when a limit or the repeat check kept the call from running.
    pub(super) refused: Option<Refused>,
}

impl Settled<'_> {
    /// Whether the tool ran and succeeded.
    pub(super) fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// Counts the call in `rojos_tool_calls_total` (and `rojos_tool_calls_refused_total` when
    /// it was refused); `took` is how long settling it took.
    pub(super) fn count(&self, metrics: &Metrics, took: Duration) {
        metrics.tool_call(self.tool.unwrap_or(UNKNOWN_TOOL), self.ok(), took);
        if let Some(refused) = self.refused {
            metrics.tool_call_refused(refused.label());
        }
    }
}

/// A call the host does not run, and why.
struct NotRun {
    failure: ToolFailure,
    refused: Option<Refused>,
}

impl NotRun {
    fn because(kind: FailureKind, message: impl Into<String>) -> NotRun {
        NotRun {
            failure: ToolFailure::new(kind, message),
            refused: None,
        }
    }
}

/// The last check before a call that passed every other one runs: the user's approval
/// (`approval.rs`). `Err`: the call is not run and the model gets the failure.
pub(super) trait Gate {
    /// Whether `call` of `tool` may run now on the project of `request`, and how.
    async fn clear(
        &mut self,
        tool: &RegisteredTool,
        call: &ToolCall,
        request: &CallRequest,
    ) -> Result<Cleared, ToolFailure>;
}

/// How a call the gate let through may run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Cleared {
    /// The paths it may only create at (it was let run unasked because they were missing):
    /// the plugin is told (`CallContext::create_only`) so it does not replace what appeared
    /// there since.
    pub(super) create_only: Vec<String>,
}

/// Runs `call`, or says why it was not run; `max_result_bytes` caps one result. `gate` is
/// asked after every other check, so a call refused anyway never waits for the user.
pub(super) async fn run_call<'r>(
    registry: &'r Registry,
    enabled: &ToolSelection,
    ledger: &mut Ledger,
    call: &ToolCall,
    request: &CallRequest,
    max_result_bytes: usize,
    gate: &mut impl Gate,
) -> Settled<'r> {
    // The one registry lookup of this call.
    let loaded = registry.get(&call.name);
    let tool = loaded.map(|t| t.name());
    let admitted = match admit(registry, loaded, enabled, ledger, call) {
        Ok(admitted) => admitted,
        Err(not_run) => {
            return Settled {
                tool,
                failure: Some(not_run.failure.kind.clone()),
                text: model_text(Err(not_run.failure)),
                refused: not_run.refused,
            }
        }
    };
    // The user's approval first: a call the user denies is not recorded.
    let cleared = match gate.clear(admitted.tool, call, request).await {
        Ok(cleared) => cleared,
        Err(failure) => {
            return Settled {
                tool,
                failure: Some(failure.kind.clone()),
                text: model_text(Err(failure)),
                refused: None,
            }
        }
    };
    let narrowed;
    let request = if cleared.create_only.is_empty() {
        request
    } else {
        narrowed = CallRequest {
            create_only: cleared.create_only,
            ..request.clone()
        };
        &narrowed
    };
    // Undo: the earlier state of the paths it changes, recorded just before it runs, and
    // their state just after, on the call's own thread.
    let changes = checkpoint_paths(admitted.tool, call);
    let around: Option<Box<dyn rojos_plugin_host::AroundCall>> =
        match (&ledger.checkpoint, &ledger.project_lock) {
            _ if changes.is_empty() => None,
            (Some(checkpoint), _) => Some(Box::new(checkpoint.around(changes, &request.root))),
            (None, Some((checkpoints, project))) => Some(Box::new(checkpoints.sharing(project))),
            (None, None) => None,
        };
    let outcome = admitted.tool.invoke(&admitted.args, request, around).await;
    drop(admitted.args);
    let failure = outcome.as_ref().err().map(|f| f.kind.clone());
    if failure.is_none() {
        ledger.seen.insert(admitted.key, call.id.clone());
    }
    // The plugin's whole text lives only until it is cut here.
    let text = ledger.budget.fit(model_text(outcome), max_result_bytes);
    Settled {
        tool,
        text,
        failure,
        refused: None,
    }
}

/// A call cleared to run.
struct Admitted<'r> {
    tool: &'r RegisteredTool,
    /// The arguments as the model wrote them, for the schema check and the plugin.
    args: ToolArgs,
    /// Tool name + canonical arguments, for the repeat check.
    key: String,
}

/// Every check before the user is asked and the plugin runs, in order: the turn's call
/// count, the arguments, the tool (`loaded`: the registry's tool of the call's name), the
/// arguments against its schema, the repeat check, the byte budgets.
fn admit<'r>(
    registry: &Registry,
    loaded: Option<&'r RegisteredTool>,
    enabled: &ToolSelection,
    ledger: &mut Ledger,
    call: &ToolCall,
) -> Result<Admitted<'r>, NotRun> {
    ledger.budget.take_call().map_err(budget_refusal)?;
    let args = match &call.arguments {
        Ok(args) => args,
        Err(why) => {
            return Err(NotRun::because(
                FailureKind::InvalidArguments,
                format!("the tool was not run: {why}"),
            ))
        }
    };
    let Some(tool) = loaded.filter(|_| enabled.allows(&call.name)) else {
        let message = unavailable(registry, enabled, &call.name, loaded.is_some());
        return Err(NotRun::because(FailureKind::Refused, message));
    };
    let args = ToolArgs::new(args.clone());
    tool.check_args(&args).map_err(|failure| NotRun {
        failure,
        refused: None,
    })?;
    let key = format!("{}\n{}", call.name, canonical_args(&args));
    if let Some(earlier) = ledger.seen.get(&key) {
        return Err(NotRun {
            failure: ToolFailure::new(
                FailureKind::Refused,
                format!(
                    "not run again: the same call was already made in this run (call {earlier}); use its result above instead of repeating it"
                ),
            ),
            refused: Some(Refused::Repeated),
        });
    }
    ledger.budget.check_bytes_left().map_err(budget_refusal)?;
    Ok(Admitted { tool, args, key })
}

/// The paths `call` changes, as its tool declares (`changes_paths`, `creates_paths`).
fn checkpoint_paths(tool: &RegisteredTool, call: &ToolCall) -> Vec<Change> {
    match &call.arguments {
        Ok(arguments) => changed_paths(tool.changes_paths(), tool.creates_paths(), arguments),
        Err(_) => Vec::new(),
    }
}

fn budget_refusal(refusal: super::budget::Refusal) -> NotRun {
    NotRun {
        failure: ToolFailure::new(FailureKind::Refused, refusal.message),
        refused: Some(Refused::Budget(refusal.limit)),
    }
}

/// Why the tool `name` cannot be called (`loaded`: a tool of that name is loaded, but not
/// enabled), and which tools can.
fn unavailable(registry: &Registry, enabled: &ToolSelection, name: &str, loaded: bool) -> String {
    let available: Vec<&str> = registry
        .tools()
        .map(|t| t.name())
        .filter(|n| enabled.allows(n))
        .collect();
    let reason = if loaded {
        format!("tool {name} is not enabled for this assistant")
    } else {
        format!("unknown tool {name:?}")
    };
    format!("{reason}; available tools: {}", available.join(", "))
}
