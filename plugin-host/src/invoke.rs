//! Runs one tool call: arguments checked against the tool's schema, then the plugin's `call`
//! on a blocking thread under a deadline, holding one of the tool's concurrency permits. Work
//! that must happen just before and after the plugin (the undo checkpoint, [`AroundCall`])
//! runs on the same thread, so a changing call costs one hand-off to a thread and back, not
//! three.
//!
//! A plugin that runs in the server's process and hangs cannot be killed, only abandoned: its
//! thread keeps its permit until it returns, so one hung tool can use at most its own cap of
//! threads. A plugin isolated in workers (`isolation`) is called through its worker instead,
//! which is ended at the deadline, so nothing is left running.

use std::{os::fd::AsRawFd, sync::Arc, time::Instant};

use abi_stable::std_types::{RStr, RString};
use rojos_plugin_api::CallContext;

use super::{
    args::{check_args, ToolArgs},
    call::{plugin_failure, AroundCall, CallRequest},
    isolation::call_in_worker,
    loader::Runner,
    outcome::{FailureKind, ToolFailure, ToolOutcome},
    start::{not_started, wait_for_thread, Start, Waited},
    Tool,
};

/// Runs `tool` on the model's `args`, checked against its schema first.
pub async fn invoke(tool: &Arc<Tool>, args: &ToolArgs, request: &CallRequest) -> ToolOutcome {
    check_call_args(tool, args)?;
    invoke_around(tool, args, request, None).await
}

/// Checks the model's `args` against `tool`'s schema: the failure the model reads when they
/// do not fit.
///
/// # Errors
///
/// [`FailureKind::InvalidArguments`], saying what does not fit and the expected parameters.
pub fn check_call_args(tool: &Tool, args: &ToolArgs) -> Result<(), ToolFailure> {
    check_args(&tool.library, args)
        .map_err(|mismatch| ToolFailure::new(FailureKind::InvalidArguments, mismatch.to_string()))
}

/// Runs `tool` on the model's `args`, with `around` just before and after the plugin. The
/// caller has checked `args` against the schema ([`check_call_args`]): the agent does so
/// before a call is asked about or admitted, so the schema is not walked twice per call.
pub async fn invoke_around(
    tool: &Arc<Tool>,
    args: &ToolArgs,
    request: &CallRequest,
    mut around: Option<Box<dyn AroundCall>>,
) -> ToolOutcome {
    let started = Instant::now();
    let name = tool.name();
    let Ok(permit) =
        tokio::time::timeout(request.timeout, Arc::clone(&tool.limiter).acquire_owned()).await
    else {
        return Err(ToolFailure::new(
            FailureKind::Busy,
            format!(
                "tool {name} is busy: too many of its calls are still running; try again later"
            ),
        ));
    };
    let Ok(permit) = permit else {
        return Err(ToolFailure::new(
            FailureKind::Host,
            format!("tool {name} is no longer available"),
        ));
    };
    let module = match &tool.library.runner {
        Runner::InProcess(module) => *module,
        Runner::Worker(pool) => {
            let _held = permit;
            let deadline = tokio::time::Instant::from_std(started + request.timeout);
            return call_in_worker(pool, name, args.text(), request, around, deadline).await;
        }
    };
    let context = CallContext {
        project_id: request.project_id.clone(),
        root_fd: request.root.as_raw_fd(),
        limits: request.limits,
        create_only: request.create_only.clone(),
    };
    let context = serde_json::to_string(&context).expect("a CallContext always serialises");
    let root = Arc::clone(&request.root);
    // The only serialisation of the arguments: the C ABI takes JSON text.
    let args = args.text().to_owned();
    let start = Arc::new(Start::default());
    // Only work before the plugin (the project's lock) can keep it waiting to start.
    let stop = around.is_some().then_some(&request.stop);
    let mut call = tokio::task::spawn_blocking({
        let start = Arc::clone(&start);
        move || {
            let _held = (permit, root);
            if let Some(around) = around.as_mut() {
                around.before().map_err(Refusal)?;
            }
            // `before` may have waited (for the project's lock, held by an undo): a call its
            // caller has given up on meanwhile must not run after all.
            if !start.run() {
                if let Some(around) = around.as_mut() {
                    around.after();
                }
                return Err(Refusal(String::new()));
            }
            let result =
                module.call()(RStr::from_str(&context), RStr::from_str(&args)).into_result();
            if let Some(around) = around.as_mut() {
                around.after();
            }
            Ok(result)
        }
    });
    let deadline = tokio::time::Instant::from_std(started + request.timeout);
    match wait_for_thread(&mut call, &start, stop, deadline).await {
        Waited::Joined(Ok(Ok(Ok(text)))) => Ok(text.into_string()),
        Waited::Joined(Ok(Ok(Err(error)))) => Err(plugin_failure(error.as_str())),
        Waited::Joined(Ok(Err(Refusal(refusal)))) => {
            Err(ToolFailure::new(FailureKind::Refused, refusal))
        }
        Waited::Joined(Err(join)) => Err(ToolFailure::new(
            FailureKind::Host,
            format!("tool {name} failed inside the host: {join}"),
        )),
        Waited::NotStarted { stopped } => Err(not_started(name, request.timeout, stopped)),
        Waited::PastDeadline => {
            tracing::warn!(tool = %name, timeout = ?request.timeout, "tool call timed out; its thread is abandoned");
            Err(ToolFailure::new(
                FailureKind::Timeout,
                format!(
                    "tool {name} did not finish within {:.1} s and was abandoned",
                    request.timeout.as_secs_f64()
                ),
            ))
        }
    }
}

/// Why [`AroundCall::before`] kept the plugin from running.
struct Refusal(String);

impl Tool {
    /// Calls the plugin's `call` on this thread, with no argument check, permit or deadline:
    /// the bare plugin boundary, for the benchmark (the server always goes through
    /// [`invoke`]). `context` is a [`CallContext`] as JSON; an error is a [`ToolError`](rojos_plugin_api::ToolError) as JSON.
    ///
    /// # Panics
    ///
    /// The tool runs in workers (its library is not open in this process).
    pub fn call_blocking(&self, context: &str, args: &str) -> Result<String, String> {
        let Runner::InProcess(module) = &self.library.runner else {
            panic!("call_blocking needs a tool loaded in-process");
        };
        module.call()(RStr::from_str(context), RStr::from_str(args))
            .into_result()
            .map(RString::into_string)
            .map_err(RString::into_string)
    }
}
