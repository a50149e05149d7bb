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

use std::{
    os::fd::AsRawFd,
    sync::Arc,
    time::{Duration, Instant},
};

use abi_stable::std_types::{RStr, RString};
use cap_std::fs::Dir;
use rojos_plugin_api::{CallContext, ErrorKind, Limits, ToolError};

use super::{
    args::{check_args, ToolArgs},
    isolation::call_in_worker,
    loader::Runner,
    outcome::{FailureKind, ToolFailure, ToolOutcome},
    Tool,
};

/// Everything one call needs besides the tool.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The project the call works on.
    pub project_id: String,
    /// The project's opened root, kept open until the plugin returns.
    pub root: Arc<Dir>,
    /// The root's absolute path, for per-project MCP servers (plugins get `root` only).
    pub root_path: std::path::PathBuf,
    /// Limits for file tools.
    pub limits: Limits,
    /// How long the call may take, waiting for a permit included.
    pub timeout: Duration,
    /// Paths the call may only create at, never replace (`CallContext::create_only`): set
    /// by the approval gate for a call it let run because they were missing.
    pub create_only: Vec<String>,
    /// Cancelled when the call's run is stopped (by a client, for want of one, at shutdown):
    /// a call running in a worker is then ended with its worker; one in the server's process
    /// finishes (docs/plugins.md, "Isolation").
    pub stop: tokio_util::sync::CancellationToken,
}

/// Blocking work around one plugin call, on the call's own thread.
pub trait AroundCall: Send {
    /// Just before the plugin runs; `Err` is the refusal the model reads, and the plugin is
    /// not called.
    fn before(&mut self) -> Result<(), String>;
    /// Just after the plugin returned, whatever it returned (also when the call's deadline
    /// passed meanwhile: the abandoned thread runs it when the plugin returns).
    fn after(&mut self);
}

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
    let call = tokio::task::spawn_blocking({
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
    let remaining = request.timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(remaining, call).await {
        Ok(Ok(Ok(Ok(text)))) => Ok(text.into_string()),
        Ok(Ok(Ok(Err(error)))) => Err(plugin_failure(error.as_str())),
        Ok(Ok(Err(Refusal(refusal)))) => Err(ToolFailure::new(FailureKind::Refused, refusal)),
        Ok(Err(join)) => Err(ToolFailure::new(
            FailureKind::Host,
            format!("tool {name} failed inside the host: {join}"),
        )),
        Err(_) if start.give_up() => Err(not_started(name, request.timeout)),
        Err(_) => {
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

/// Who settles whether a call's plugin runs: its thread, once `before` is done, or its caller,
/// once the deadline passed. Whichever comes first wins, so a call reported as not run never
/// runs later.
#[derive(Default)]
struct Start(std::sync::atomic::AtomicU8);

impl Start {
    const WAITING: u8 = 0;
    const RUNNING: u8 = 1;
    const GIVEN_UP: u8 = 2;

    /// The call's thread: whether the plugin may run (the caller has not given up).
    fn run(&self) -> bool {
        self.settle(Self::RUNNING)
    }

    /// The caller at the deadline: whether the plugin had not started (and now never will).
    fn give_up(&self) -> bool {
        self.settle(Self::GIVEN_UP)
    }

    fn settle(&self, to: u8) -> bool {
        use std::sync::atomic::Ordering;
        self.0
            .compare_exchange(Self::WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The model's error for a call whose deadline passed before its plugin started: it waited
/// for what must come first (the project's lock while an undo restores it, its recording).
pub(super) fn not_started(name: &str, timeout: Duration) -> ToolFailure {
    ToolFailure::new(
        FailureKind::Timeout,
        format!(
            "tool {name} was not run: it could not start within {:.1} s (the project was busy, for example restoring an undo); nothing was changed, so it is safe to call it again",
            timeout.as_secs_f64()
        ),
    )
}

impl Tool {
    /// Calls the plugin's `call` on this thread, with no argument check, permit or deadline:
    /// the bare plugin boundary, for the benchmark (the server always goes through
    /// [`invoke`]). `context` is a [`CallContext`] as JSON; an error is a [`ToolError`] as JSON.
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

/// The plugin's error (a [`ToolError`] as JSON) with its kind kept. Text that is not a
/// `ToolError` breaks the plugin protocol: it is passed on whole, as an internal error.
pub(super) fn plugin_failure(json: &str) -> ToolFailure {
    match serde_json::from_str::<ToolError>(json) {
        Ok(error) => ToolFailure::new(FailureKind::Plugin(error.kind), error.message),
        Err(_) => ToolFailure::new(FailureKind::Plugin(ErrorKind::INTERNAL), json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_error_kind_reaches_the_outcome() {
        let json = r#"{"kind":"outside_root","message":"path '../x' leads outside the project"}"#;
        assert_eq!(
            plugin_failure(json),
            ToolFailure::new(
                FailureKind::Plugin(ErrorKind::OUTSIDE_ROOT),
                "path '../x' leads outside the project"
            )
        );
        let custom = r#"{"kind":"quota","message":"over quota"}"#;
        assert_eq!(
            plugin_failure(custom).kind,
            FailureKind::Plugin(ErrorKind("quota".into()))
        );
    }

    #[test]
    fn an_error_that_is_no_tool_error_is_kept_whole_as_internal() {
        assert_eq!(
            plugin_failure("boom"),
            ToolFailure::new(FailureKind::Plugin(ErrorKind::INTERNAL), "boom")
        );
    }
}
