//! Runs one tool call: arguments checked against the tool's schema, then the plugin's `call`
//! on a blocking thread under a deadline, holding one of the tool's concurrency permits.
//!
//! A hung plugin thread cannot be killed, only abandoned: it keeps its permit until it
//! returns, so one hung tool can use at most its own cap of threads, and costs its callers
//! one time-out each, never the server.

use std::{
    os::fd::AsRawFd,
    sync::Arc,
    time::{Duration, Instant},
};

use abi_stable::std_types::{RStr, RString};
use cap_std::fs::Dir;
use rojos_plugin_api::{CallContext, Limits, ToolError};
use serde_json::Value;

use super::{loader::Library, Tool};

/// The outcome of a call as the model and the client see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The tool's result text, or what went wrong.
    pub result: String,
}

impl ToolOutcome {
    /// A failed call with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutcome {
            ok: false,
            result: message.into(),
        }
    }
}

/// Everything one call needs besides the tool.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The project the call works on.
    pub project_id: String,
    /// The project's opened root, kept open until the plugin returns.
    pub root: Arc<Dir>,
    /// Limits for file tools.
    pub limits: Limits,
    /// How long the call may take, waiting for a permit included.
    pub timeout: Duration,
}

/// Runs `tool` on the model's `args` (JSON text).
pub async fn invoke(tool: &Arc<Tool>, args: &str, request: &CallRequest) -> ToolOutcome {
    let started = Instant::now();
    let name = tool.name().to_owned();
    if let Err(message) = check_args(&tool.library, args) {
        return ToolOutcome::error(message);
    }
    let Ok(permit) =
        tokio::time::timeout(request.timeout, Arc::clone(&tool.limiter).acquire_owned()).await
    else {
        return ToolOutcome::error(format!(
            "tool {name} is busy: too many of its calls are still running; try again later"
        ));
    };
    let Ok(permit) = permit else {
        return ToolOutcome::error(format!("tool {name} is no longer available"));
    };
    let context = CallContext {
        project_id: request.project_id.clone(),
        root_fd: request.root.as_raw_fd(),
        limits: request.limits,
    };
    let context = serde_json::to_string(&context).expect("a CallContext always serialises");
    let library = Arc::clone(&tool.library);
    let root = Arc::clone(&request.root);
    let args = args.to_owned();
    let call = tokio::task::spawn_blocking(move || {
        let _held = (permit, root);
        library.module.call()(RStr::from_str(&context), RStr::from_str(&args)).into_result()
    });
    let remaining = request.timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(remaining, call).await {
        Ok(Ok(Ok(text))) => ToolOutcome {
            ok: true,
            result: text.into_string(),
        },
        Ok(Ok(Err(error))) => ToolOutcome::error(tool_error_message(error.as_str())),
        Ok(Err(join)) => ToolOutcome::error(format!("tool {name} failed inside the host: {join}")),
        Err(_) => {
            tracing::warn!(tool = %name, timeout = ?request.timeout, "tool call timed out; its thread is abandoned");
            ToolOutcome::error(format!(
                "tool {name} did not finish within {:.1} s and was abandoned",
                request.timeout.as_secs_f64()
            ))
        }
    }
}

impl Tool {
    /// Calls the plugin's `call` on this thread, with no argument check, permit or deadline:
    /// the bare plugin boundary, for the benchmark (the server always goes through
    /// [`invoke`]). `context` is a [`CallContext`] as JSON; an error is a [`ToolError`] as JSON.
    pub fn call_blocking(&self, context: &str, args: &str) -> Result<String, String> {
        self.library.module.call()(RStr::from_str(context), RStr::from_str(args))
            .into_result()
            .map(RString::into_string)
            .map_err(RString::into_string)
    }
}

/// Checks the arguments against the tool's schema, with a message the model can act on.
fn check_args(library: &Library, args: &str) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(args).map_err(|e| format!("arguments are not valid JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!(
            "arguments must be a JSON object, got {}",
            rojos_llm::json_type_name(&value)
        ));
    }
    let problems: Vec<String> = library
        .validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        let spec = &library.manifest.spec;
        Err(format!(
            "invalid arguments for {}: {}; expected parameters: {}",
            spec.name,
            problems.join("; "),
            spec.parameters
        ))
    }
}

fn tool_error_message(json: &str) -> String {
    match serde_json::from_str::<ToolError>(json) {
        Ok(error) => error.message,
        Err(_) => json.to_owned(),
    }
}
