//! The server's Prometheus metrics: one registry per server (so test hosts in one process
//! keep their own counts), updated by the agent loop and the HTTP layer, rendered by
//! `GET /metrics` in the Prometheus text format (0.0.4). Label values are bounded: stop
//! reasons, error kinds and the names of loaded tools only (a name the model made up is
//! counted as `unknown`): `labels` lists every value each label may take. Read at each
//! scrape: the process's standard figures (`process`) and the runtime's (`runtime`), written
//! by `scrape`. The log writer's dropped lines are read from the source the binary sets
//! ([`Metrics::read_log_drops_from`]).

mod labels;
mod process;
mod runtime;
mod scrape;

pub use labels::{NO_RESULT, STOP_REASONS};

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
    plugins_quarantined: Family<ToolNameLabels, Gauge>,
    requests_limited: Family<LimitLabels, Counter>,
    tool_calls_refused: Family<ReasonLabels, Counter>,
    connections_open: Gauge,
    connections_closed: Family<ReasonLabels, Counter>,
    log_lines_dropped: Counter,
    /// Where the log writer's count of dropped lines is read (`read_log_drops_from`).
    log_drops: std::sync::OnceLock<fn() -> u64>,
    mcp_sessions_open: Gauge,
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
        let mut metrics = Metrics {
            chats_started: Counter::default(),
            chats_finished: Family::default(),
            model_turns: Counter::default(),
            model_turn_seconds: turn_histogram(),
            tool_calls: Family::default(),
            tool_call_seconds: Family::new_with_constructor(tool_histogram),
            provider_errors: Family::default(),
            streams_open: Gauge::default(),
            plugins_loaded: Gauge::default(),
            plugins_quarantined: Family::default(),
            requests_limited: Family::default(),
            tool_calls_refused: Family::default(),
            connections_open: Gauge::default(),
            connections_closed: Family::default(),
            log_lines_dropped: Counter::default(),
            log_drops: std::sync::OnceLock::new(),
            mcp_sessions_open: Gauge::default(),
            registry: Registry::default(),
        };
        // The standard process metrics keep their standard names; the server's own are
        // `rojos_*`.
        metrics
            .registry
            .register_collector(Box::new(process::ProcessCollector));
        let registry = metrics.registry.sub_registry_with_prefix("rojos");
        registry.register_collector(Box::new(runtime::RuntimeCollector));
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
            "plugins_quarantined",
            "1 for each tool whose plugin is quarantined (its workers kept dying; docs/plugins.md)",
            metrics.plugins_quarantined.clone(),
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
        registry.register(
            "mcp_sessions_open",
            "MCP handshake sessions open now on /mcp (docs/mcp.md)",
            metrics.mcp_sessions_open.clone(),
        );
        metrics
    }

    /// A chat run started.
    pub fn chat_started(&self) {
        self.chats_started.inc();
    }

    /// A chat run ended with `stop_reason`, as `DONE.stopReason` spells it
    /// (`StopReason::as_str` of the agent).
    pub fn chat_finished(&self, stop_reason: &'static str) {
        debug_assert!(labels::STOP_REASONS.contains(&stop_reason), "{stop_reason}");
        self.chats_finished
            .get_or_create(&StopLabels { stop_reason })
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
        debug_assert!(labels::provider_error_kinds().any(|k| k == kind), "{kind}");
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
        debug_assert!(labels::TOOL_OUTCOMES.contains(&outcome), "{outcome}");
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

    /// A request was refused by `limit` (`concurrency`, `token`, `rate`, or an MCP session
    /// limit).
    pub fn limited(&self, limit: &'static str) {
        debug_assert!(labels::LIMITS.contains(&limit), "{limit}");
        self.requests_limited
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    /// A tool call was not run because of `reason` (`calls_per_turn`, `turn_result_bytes`,
    /// `run_result_bytes`, `repeated`).
    pub fn tool_call_refused(&self, reason: &'static str) {
        debug_assert!(labels::REFUSALS.contains(&reason), "{reason}");
        self.tool_calls_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// The server closed a connection for `reason` (`CloseReason::label`).
    pub fn connection_closed(&self, reason: &'static str) {
        debug_assert!(labels::CLOSE_REASONS.contains(&reason), "{reason}");
        self.connections_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// `open` MCP sessions are open now (or being opened).
    pub fn mcp_sessions_open(&self, open: usize) {
        self.mcp_sessions_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// Counts one open connection in `rojos_connections_open` until the guard is dropped.
    pub fn open_connection(&self) -> Open {
        Open::counting(&self.connections_open)
    }

    /// Counts one open chat stream in `rojos_streams_open` until the guard is dropped.
    pub fn open_stream(&self) -> Open {
        Open::counting(&self.streams_open)
    }

    /// The tools whose plugins are quarantined now (read at each scrape).
    pub fn quarantined<'a>(&self, tools: impl IntoIterator<Item = &'a str>) {
        self.plugins_quarantined.clear();
        for tool in tools {
            self.plugins_quarantined
                .get_or_create(&ToolNameLabels {
                    tool: tool.to_owned(),
                })
                .set(1);
        }
    }

    /// Reads the log writer's count of dropped lines from `source` at each scrape (the
    /// binary's log; a server without one counts none). Only the first source set is kept.
    pub fn read_log_drops_from(&self, source: fn() -> u64) {
        let _ = self.log_drops.set(source);
    }

    /// Every metric in the Prometheus text format, with `plugins_loaded` tools in the registry.
    pub fn render(&self, plugins_loaded: usize) -> String {
        self.plugins_loaded
            .set(i64::try_from(plugins_loaded).unwrap_or(i64::MAX));
        // The log writer keeps its own count; the counter catches up with it (atomically:
        // two scrapes at once must not both add the difference).
        if let Some(dropped) = self.log_drops.get() {
            self.log_lines_dropped
                .inner()
                .fetch_max(dropped(), std::sync::atomic::Ordering::Relaxed);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_s_dropped_lines_are_read_from_its_source_at_each_scrape() {
        let metrics = Metrics::new();
        assert!(metrics
            .render(0)
            .contains("rojos_log_lines_dropped_total 0"));
        metrics.read_log_drops_from(|| 7);
        assert!(metrics
            .render(0)
            .contains("rojos_log_lines_dropped_total 7"));
        // A second source is ignored: the binary has one log.
        metrics.read_log_drops_from(|| 9);
        assert!(metrics
            .render(0)
            .contains("rojos_log_lines_dropped_total 7"));
    }

    #[test]
    fn counts_render_in_the_prometheus_text_format() {
        let metrics = Metrics::new();
        metrics.chat_started();
        metrics.chat_finished("completed");
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
    fn model_turns_limits_mcp_sessions_and_quarantined_plugins_render() {
        let metrics = Metrics::new();
        metrics.model_turn_started();
        metrics.model_turn_started();
        metrics.model_turn_ended(Duration::from_millis(250));
        metrics.limited("rate");
        metrics.mcp_sessions_open(3);
        metrics.quarantined(["crashy", "loopy"]);
        let text = metrics.render(0);
        for line in [
            "rojos_model_turns_total 2",
            "rojos_model_turn_duration_seconds_count 1",
            "rojos_model_turn_duration_seconds_sum 0.25",
            r#"rojos_requests_limited_total{limit="rate"} 1"#,
            "rojos_mcp_sessions_open 3",
            r#"rojos_plugins_quarantined{tool="crashy"} 1"#,
            r#"rojos_plugins_quarantined{tool="loopy"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        // Each scrape says which are quarantined now.
        metrics.quarantined(["loopy"]);
        let text = metrics.render(0);
        assert!(!text.contains(r#"tool="crashy""#), "{text}");
        assert!(text.contains(r#"rojos_plugins_quarantined{tool="loopy"} 1"#));
    }

    /// The value of the unlabelled series `name` in `text`.
    fn value(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
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
        let off_runtime = metrics.render(0);
        assert!(off_runtime.lines().any(|l| l == "rojos_runtime_workers 0"));
        assert_eq!(
            value(&off_runtime, "rojos_runtime_busy_seconds_total"),
            None
        );
    }

    #[test]
    fn the_runtime_reports_its_workers_busy_time_parks_and_tasks() {
        let metrics = Metrics::new();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("runtime");
        let before = runtime.block_on(async { metrics.render(0) });
        // A task that keeps a worker busy for 100 ms, then ten that each sleep, so a worker
        // parks between their wakes; one more left waiting, alive.
        runtime.block_on(async {
            tokio::spawn(async {
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(100) {
                    std::hint::spin_loop();
                }
            })
            .await
            .expect("spinning task");
            for _ in 0..10 {
                tokio::spawn(tokio::time::sleep(Duration::from_millis(2)))
                    .await
                    .expect("sleeping task");
            }
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let waiting = runtime.spawn(stopped);
        let after = runtime.block_on(async { metrics.render(0) });
        let busy = |text: &str| value(text, "rojos_runtime_busy_seconds_total").expect(text);
        let parks = |text: &str| value(text, "rojos_runtime_worker_parks_total").expect(text);
        assert!(
            busy(&after) - busy(&before) >= 0.1,
            "the spinning task's 100 ms are busy time: {before}\n{after}"
        );
        assert!(
            parks(&after) - parks(&before) >= 10.0,
            "a worker parks while each task sleeps: {before}\n{after}"
        );
        assert!(value(&after, "rojos_runtime_alive_tasks").expect(&after) >= 1.0);
        assert!(value(&after, "rojos_runtime_global_queue_depth").is_some());
        drop(stop);
        runtime.block_on(waiting).expect("waiting task").ok();
    }

    #[test]
    fn the_process_metrics_are_this_process_s_own() {
        let status = |field: &str| -> f64 {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            let line = status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .expect(field);
            line.split_whitespace()
                .next()
                .expect(field)
                .parse()
                .expect(field)
        };
        let rss_before = status("VmRSS:") * 1024.0;
        let cpu_before = cpu_seconds();
        let text = Metrics::new().render(0);
        let cpu_after = cpu_seconds();
        let rss_after = status("VmRSS:") * 1024.0;

        // The kernel counts CPU time in ticks; the metric reads the same count.
        let cpu = value(&text, "process_cpu_seconds_total").expect(&text);
        assert!(
            cpu_before - 0.011 <= cpu && cpu <= cpu_after + 0.011,
            "{cpu_before} <= {cpu} <= {cpu_after}"
        );
        // Resident, not virtual, memory: within what the test's other threads may allocate
        // meanwhile of the kernel's figure read around it, and far below the virtual size.
        let rss = value(&text, "process_resident_memory_bytes").expect(&text);
        let (low, high) = (rss_before.min(rss_after), rss_before.max(rss_after));
        let slack = 16.0 * 1024.0 * 1024.0;
        assert!(
            low - slack <= rss && rss <= high + slack,
            "{rss} within 16 MiB of {low}..{high}"
        );
        let virtual_size = value(&text, "process_virtual_memory_bytes").expect(&text);
        assert!(rss < virtual_size, "{rss} < {virtual_size}");
        let open = value(&text, "process_open_fds").expect(&text);
        assert!(open >= 3.0, "stdin, stdout and stderr at least: {open}");
        let max = value(&text, "process_max_fds").expect(&text);
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map_or(0.0, |n| n as f64);
        assert_eq!(max, limit);
        let threads = value(&text, "process_threads").expect(&text);
        assert!(threads >= 1.0, "{threads}");
        let started = value(&text, "process_start_time_seconds").expect(&text);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs_f64();
        assert!(
            started <= now + 1.0 && started >= now - 24.0 * 3600.0,
            "this test process started within a day: {started} against {now}"
        );
        // The standard names, without the server's prefix.
        assert!(!text.contains("rojos_process_"), "{text}");
    }

    /// This process's user and system time from `/proc/self/stat`, in seconds.
    fn cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
        // The fields after the command's name, which is in parentheses and may hold spaces.
        let after_name = &stat[stat.rfind(')').expect("a name") + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks: f64 =
            fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
        ticks / rustix::param::clock_ticks_per_second() as f64
    }
}
