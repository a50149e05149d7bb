//! `[server]` and `[limits]` keys that bound the server as a whole: the HTTP side's
//! time-outs and connections (read into the accept loop's `HttpLimits`), a run's budgets,
//! the MCP sessions, how long a run nobody follows goes on, the file tools' limits and the
//! runtime's threads.

use std::{net::SocketAddr, num::NonZeroUsize, time::Duration};

use rojos_http_server::HttpLimits;
use rojos_plugin_api::Limits;

use rojos_agent::RunBudgets;
use rojos_mcp_server::McpSessionLimits;

use super::{
    keys::{at_least, invalid, seconds_key, ConfigError},
    raw::{RawLimits, RawServer},
};

/// The most worker threads `[server] worker_threads` may ask for: far more than any machine's
/// cores, so a typo (an extra digit or three) is refused, not a thousand idle threads started.
const MAX_WORKER_THREADS: usize = 1024;

pub(super) fn parse_worker_threads(
    value: Option<usize>,
) -> Result<Option<NonZeroUsize>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match NonZeroUsize::new(value) {
        Some(n) if value <= MAX_WORKER_THREADS => Ok(Some(n)),
        _ => Err(invalid(
            "server.worker_threads",
            format!("must be between 1 and {MAX_WORKER_THREADS}"),
        )),
    }
}

pub(super) fn parse_bind(text: Option<&str>) -> Result<SocketAddr, ConfigError> {
    let text = text.unwrap_or("127.0.0.1:8080");
    text.parse()
        .map_err(|_| invalid("server.bind", format!("not a socket address: {text:?}")))
}

pub(super) fn parse_limits(raw: &RawLimits) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let positive = |key: &str, value: Option<u64>, default: u64| {
        at_least(&format!("limits.{key}"), value, default, 1)
    };
    Ok(Limits {
        max_read_bytes: positive(
            "max_read_bytes",
            raw.max_read_bytes,
            defaults.max_read_bytes,
        )?,
        max_write_bytes: positive(
            "max_write_bytes",
            raw.max_write_bytes,
            defaults.max_write_bytes,
        )?,
        max_list_entries: positive(
            "max_list_entries",
            raw.max_list_entries,
            defaults.max_list_entries,
        )?,
    })
}

/// How long a run nobody follows goes on by default (`[limits] unattended_run_secs`).
pub const DEFAULT_UNATTENDED_RUN: Duration = Duration::from_secs(600);

/// The most seconds `unattended_run_secs` may say (a day).
const MAX_UNATTENDED_RUN_SECS: f64 = 86_400.0;

/// `[limits] unattended_run_secs`: how long a run goes on with nobody following it; `0`
/// stops it as soon as its last client leaves.
pub(super) fn parse_unattended(value: Option<f64>) -> Result<rojos_agent::Unattended, ConfigError> {
    use rojos_agent::Unattended;
    match value {
        None => Ok(Unattended::After(DEFAULT_UNATTENDED_RUN)),
        Some(0.0) => Ok(Unattended::StopAtOnce),
        Some(s) if s > 0.0 && s <= MAX_UNATTENDED_RUN_SECS => {
            Ok(Unattended::After(Duration::from_secs_f64(s)))
        }
        Some(_) => Err(invalid(
            "limits.unattended_run_secs",
            format!(
                "must be between 0 (stop a run when its last client leaves) and \
                 {MAX_UNATTENDED_RUN_SECS} seconds"
            ),
        )),
    }
}

/// The most seconds `mcp_session_idle_secs` may say (a day).
const MAX_MCP_SESSION_IDLE_SECS: f64 = 86_400.0;

/// `[limits]`'s MCP session keys. A session must outlive a tool call (`call_timeout`): its
/// idle clock runs while a call of it is under way, so the default idle time is at least
/// twice the call time-out and a shorter one is refused.
pub(super) fn parse_mcp_sessions(
    raw: &RawLimits,
    call_timeout: Duration,
) -> Result<McpSessionLimits, ConfigError> {
    let defaults = McpSessionLimits::default();
    let max_sessions = at_least(
        "limits.max_mcp_sessions",
        raw.max_mcp_sessions,
        defaults.max_sessions,
        1,
    )?;
    let max_sessions_per_token = at_least(
        "limits.max_mcp_sessions_per_token",
        raw.max_mcp_sessions_per_token,
        defaults.max_sessions_per_token,
        1,
    )?;
    let idle = seconds_key(
        "limits.mcp_session_idle_secs",
        raw.mcp_session_idle_secs,
        defaults.idle.max(call_timeout * 2),
        MAX_MCP_SESSION_IDLE_SECS,
    )?;
    if idle <= call_timeout {
        return Err(invalid(
            "limits.mcp_session_idle_secs",
            format!(
                "must be longer than [plugins] call_timeout_secs ({} s): a session's idle \
                 time runs while one of its tool calls does",
                call_timeout.as_secs_f64()
            ),
        ));
    }
    Ok(McpSessionLimits {
        max_sessions,
        max_sessions_per_token,
        idle,
    })
}

pub(super) fn parse_http(raw: &RawServer) -> Result<HttpLimits, ConfigError> {
    let defaults = HttpLimits::default();
    let max_connections = raw.max_connections.unwrap_or(defaults.max_connections);
    if max_connections < 16 {
        return Err(invalid("server.max_connections", "must be at least 16"));
    }
    Ok(HttpLimits {
        header_read_timeout: seconds_key(
            "server.header_read_timeout_secs",
            raw.header_read_timeout_secs,
            defaults.header_read_timeout,
            3600.0,
        )?,
        idle_timeout: seconds_key(
            "server.idle_timeout_secs",
            raw.idle_timeout_secs,
            defaults.idle_timeout,
            86_400.0,
        )?,
        max_connections,
        stream_write_timeout: seconds_key(
            "server.stream_write_timeout_secs",
            raw.stream_write_timeout_secs,
            defaults.stream_write_timeout,
            3600.0,
        )?,
    })
}

pub(super) fn parse_budgets(
    raw: &RawLimits,
    max_result_bytes: usize,
) -> Result<RunBudgets, ConfigError> {
    let defaults = RunBudgets::default();
    let at_least = |key: &str, value: Option<usize>, default: usize, min: usize| {
        at_least(&format!("limits.{key}"), value, default, min)
    };
    let budgets = RunBudgets {
        max_tool_calls_per_turn: at_least(
            "max_tool_calls_per_turn",
            raw.max_tool_calls_per_turn,
            defaults.max_tool_calls_per_turn,
            1,
        )?,
        max_turn_result_bytes: at_least(
            "max_turn_result_bytes",
            raw.max_turn_result_bytes,
            defaults.max_turn_result_bytes.max(max_result_bytes),
            max_result_bytes,
        )?,
        max_run_result_bytes: at_least(
            "max_run_result_bytes",
            raw.max_run_result_bytes,
            defaults.max_run_result_bytes.max(max_result_bytes),
            max_result_bytes,
        )?,
        max_model_turn_bytes: at_least(
            "max_model_turn_bytes",
            raw.max_model_turn_bytes,
            defaults.max_model_turn_bytes,
            4096,
        )?,
        max_conversation_bytes: at_least(
            "max_conversation_bytes",
            raw.max_conversation_bytes,
            defaults.max_conversation_bytes,
            64 * 1024,
        )?,
    };
    if budgets.max_run_result_bytes < budgets.max_turn_result_bytes {
        return Err(invalid(
            "limits.max_run_result_bytes",
            "must be at least limits.max_turn_result_bytes",
        ));
    }
    Ok(budgets)
}
