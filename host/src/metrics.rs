//! The server's Prometheus metrics: one registry per server (so test hosts in one process
//! keep their own counts), updated by the agent loop and the HTTP layer, rendered by
//! `GET /metrics` in the Prometheus text format (0.0.4). Label values are bounded: stop
//! reasons, error kinds and the names of loaded tools only (a name the model made up is
//! counted as `unknown`).

use std::time::Duration;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{exponential_buckets, Histogram},
    },
    registry::{Registry, Unit},
};

use crate::agent::StopReason;

/// The `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The tool label of a call to a tool that is not loaded.
pub const UNKNOWN_TOOL: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StopLabels {
    stop_reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolNameLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

/// Model turns: 1 ms to about a minute.
fn turn_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Tool calls: 25 µs to about 13 s.
fn tool_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_025, 2.0, 20))
}

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    chats_started: Counter,
    chats_finished: Family<StopLabels, Counter>,
    model_turns: Counter,
    model_turn_seconds: Histogram,
    tool_calls: Family<ToolLabels, Counter>,
    tool_call_seconds: Family<ToolNameLabels, Histogram, fn() -> Histogram>,
    provider_errors: Family<KindLabels, Counter>,
    streams_open: Gauge,
    plugins_loaded: Gauge,
    runtime_workers: Gauge,
    requests_limited: Family<LimitLabels, Counter>,
    tool_calls_refused: Family<ReasonLabels, Counter>,
    connections_open: Gauge,
    connections_closed: Family<ReasonLabels, Counter>,
    log_lines_dropped: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("rojos");
        let metrics = Metrics {
            chats_started: Counter::default(),
            chats_finished: Family::default(),
            model_turns: Counter::default(),
            model_turn_seconds: turn_histogram(),
            tool_calls: Family::default(),
            tool_call_seconds: Family::new_with_constructor(tool_histogram),
            provider_errors: Family::default(),
            streams_open: Gauge::default(),
            plugins_loaded: Gauge::default(),
            runtime_workers: Gauge::default(),
            requests_limited: Family::default(),
            tool_calls_refused: Family::default(),
            connections_open: Gauge::default(),
            connections_closed: Family::default(),
            log_lines_dropped: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "chats_started",
            "Chats started (POST /chat accepted)",
            metrics.chats_started.clone(),
        );
        registry.register(
            "chats_finished",
            "Chats finished, by DONE stop reason",
            metrics.chats_finished.clone(),
        );
        registry.register(
            "model_turns",
            "Model turns requested from a provider",
            metrics.model_turns.clone(),
        );
        registry.register_with_unit(
            "model_turn_duration",
            "Duration of model turns that completed or failed",
            Unit::Seconds,
            metrics.model_turn_seconds.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls, by tool and outcome (ok, error or cancelled)",
            metrics.tool_calls.clone(),
        );
        registry.register_with_unit(
            "tool_call_duration",
            "Duration of tool calls, checks and waiting for a permit included",
            Unit::Seconds,
            metrics.tool_call_seconds.clone(),
        );
        registry.register(
            "provider_errors",
            "Failed model turns, by kind of provider error",
            metrics.provider_errors.clone(),
        );
        registry.register(
            "streams_open",
            "Chat streams (NDJSON bodies) open now",
            metrics.streams_open.clone(),
        );
        registry.register(
            "plugins_loaded",
            "Tool plugins in the current registry",
            metrics.plugins_loaded.clone(),
        );
        registry.register(
            "runtime_workers",
            "Worker threads of the server's runtime (`[server] worker_threads`, else one per core)",
            metrics.runtime_workers.clone(),
        );
        registry.register(
            "requests_limited",
            "Chats refused with 429, by limit (concurrency or rate)",
            metrics.requests_limited.clone(),
        );
        registry.register(
            "tool_calls_refused",
            "Tool calls not run because of a run budget or the repeated-call check, by reason",
            metrics.tool_calls_refused.clone(),
        );
        registry.register(
            "connections_open",
            "HTTP connections open now",
            metrics.connections_open.clone(),
        );
        registry.register(
            "connections_closed",
            "HTTP connections closed by the server, by reason \
             (header_timeout, idle, evicted, write_timeout, refused)",
            metrics.connections_closed.clone(),
        );
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because stderr was not read fast enough (logging.rs)",
            metrics.log_lines_dropped.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// A chat run started.
    pub fn chat_started(&self) {
        self.chats_started.inc();
    }

    /// A chat run ended with `stop`.
    pub fn chat_finished(&self, stop: StopReason) {
        self.chats_finished
            .get_or_create(&StopLabels {
                stop_reason: stop_label(stop),
            })
            .inc();
    }

    /// A model turn is requested.
    pub fn model_turn_started(&self) {
        self.model_turns.inc();
    }

    /// A model turn completed or failed after `took`.
    pub fn model_turn_ended(&self, took: Duration) {
        self.model_turn_seconds.observe(took.as_secs_f64());
    }

    /// A model turn failed with a provider error of `kind` (`LlmError::kind`).
    pub fn provider_error(&self, kind: &'static str) {
        self.provider_errors
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// A tool call of `tool` (a loaded tool's name, or [`UNKNOWN_TOOL`]) ended.
    pub fn tool_call(&self, tool: &str, ok: bool, took: Duration) {
        self.tool_call_ended(tool, if ok { "ok" } else { "error" }, took);
    }

    /// A tool call of `tool` was dropped before it settled: its caller cancelled it (an MCP
    /// client's `notifications/cancelled`, `docs/mcp.md`).
    pub fn tool_call_cancelled(&self, tool: &str, took: Duration) {
        self.tool_call_ended(tool, "cancelled", took);
    }

    fn tool_call_ended(&self, tool: &str, outcome: &'static str, took: Duration) {
        self.tool_calls
            .get_or_create(&ToolLabels {
                tool: tool.to_owned(),
                outcome,
            })
            .inc();
        self.tool_call_seconds
            .get_or_create(&ToolNameLabels {
                tool: tool.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A chat was refused by `limit` (`concurrency` or `rate`).
    pub fn limited(&self, limit: &'static str) {
        self.requests_limited
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    /// A tool call was not run because of `reason` (`calls_per_turn`, `turn_result_bytes`,
    /// `run_result_bytes`, `repeated`).
    pub fn tool_call_refused(&self, reason: &'static str) {
        self.tool_calls_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// The server closed a connection for `reason` (`CloseReason::label`).
    pub fn connection_closed(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Counts one open connection in `rojos_connections_open` until the guard is dropped.
    pub fn open_connection(&self) -> Open {
        Open::counting(&self.connections_open)
    }

    /// Counts one open chat stream in `rojos_streams_open` until the guard is dropped.
    pub fn open_stream(&self) -> Open {
        Open::counting(&self.streams_open)
    }

    /// Every metric in the Prometheus text format, with `plugins_loaded` tools in the registry.
    pub fn render(&self, plugins_loaded: usize) -> String {
        self.plugins_loaded
            .set(i64::try_from(plugins_loaded).unwrap_or(i64::MAX));
        // Rendered from a request, on the server's runtime; 0 from anywhere else.
        let workers = tokio::runtime::Handle::try_current()
            .map_or(0, |runtime| runtime.metrics().num_workers());
        self.runtime_workers
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        // The log writer keeps its own count; the counter catches up with it (atomically:
        // two scrapes at once must not both add the difference).
        self.log_lines_dropped.inner().fetch_max(
            crate::logging::dropped_lines(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// Something open (a chat stream, a connection), counted in its gauge while it lives.
#[derive(Debug)]
pub struct Open {
    gauge: Gauge,
}

impl Open {
    fn counting(gauge: &Gauge) -> Open {
        gauge.inc();
        Open {
            gauge: gauge.clone(),
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A stop reason as `DONE.stopReason` spells it.
fn stop_label(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Completed => "completed",
        StopReason::MaxSteps => "max_steps",
        StopReason::ProviderError => "provider_error",
        StopReason::Cancelled => "cancelled",
        StopReason::InternalError => "internal_error",
        StopReason::LimitReached => "limit_reached",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_labels_are_the_wire_spelling() {
        for stop in [
            StopReason::Completed,
            StopReason::MaxSteps,
            StopReason::ProviderError,
            StopReason::Cancelled,
            StopReason::InternalError,
            StopReason::LimitReached,
        ] {
            let wire = serde_json::to_value(stop).unwrap();
            assert_eq!(wire, stop_label(stop));
        }
    }

    #[test]
    fn counts_render_in_the_prometheus_text_format() {
        let metrics = Metrics::new();
        metrics.chat_started();
        metrics.chat_finished(StopReason::Completed);
        metrics.tool_call("list_files", true, Duration::from_micros(30));
        metrics.tool_call_cancelled("list_files", Duration::from_micros(30));
        metrics.provider_error("status");
        metrics.tool_call_refused("calls_per_turn");
        let open = metrics.open_stream();
        let _connection = metrics.open_connection();
        metrics.connection_closed("idle");
        let text = metrics.render(5);
        for line in [
            "# TYPE rojos_chats_started_total counter",
            "rojos_chats_started_total 1",
            r#"rojos_chats_finished_total{stop_reason="completed"} 1"#,
            r#"rojos_tool_calls_total{tool="list_files",outcome="ok"} 1"#,
            r#"rojos_tool_calls_total{tool="list_files",outcome="cancelled"} 1"#,
            r#"rojos_tool_call_duration_seconds_count{tool="list_files"} 2"#,
            r#"rojos_provider_errors_total{kind="status"} 1"#,
            r#"rojos_tool_calls_refused_total{reason="calls_per_turn"} 1"#,
            "rojos_streams_open 1",
            "rojos_plugins_loaded 5",
            "rojos_model_turns_total 0",
            "rojos_connections_open 1",
            r#"rojos_connections_closed_total{reason="idle"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        drop(open);
        assert!(metrics
            .render(5)
            .lines()
            .any(|l| l == "rojos_streams_open 0"));
    }

    #[test]
    fn the_runtime_workers_are_those_of_the_runtime_it_is_rendered_on() {
        let metrics = Metrics::new();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
            .build()
            .expect("runtime");
        let text = runtime.block_on(async { metrics.render(0) });
        assert!(
            text.lines().any(|l| l == "rojos_runtime_workers 3"),
            "{text}"
        );
        assert!(metrics
            .render(0)
            .lines()
            .any(|l| l == "rojos_runtime_workers 0"));
    }
}
