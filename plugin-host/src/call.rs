//! One plugin call's shape, wherever it runs: what the call needs besides the tool
//! ([`CallRequest`]), the blocking work around it ([`AroundCall`]), and the failures both the
//! in-process path (`invoke`) and the worker path (`isolation`) report alike.

use std::{sync::Arc, time::Duration};

use cap_std::fs::Dir;
use rojos_plugin_api::{ErrorKind, Limits, ToolError};

use super::outcome::{FailureKind, ToolFailure};

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
    /// finishes (docs/plugins.md, "Isolation"); one still waiting to start is not run.
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
