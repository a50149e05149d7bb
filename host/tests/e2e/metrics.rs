//! `GET /metrics`: Prometheus text for any valid token, exact counts after a known set of
//! conversations (one complete, one failing at the provider, one calling an unknown tool), and
//! the real binary's own CPU, memory, descriptors, threads and runtime, as its `/proc` shows
//! them.

use serde_json::json;

use crate::support::{
    binary::RunningBinary,
    host::{chat_at, get_at, HostConfig, TestHost, DEMO_TOKEN},
    ndjson::Stream,
    seed,
    upstream::{ScriptedUpstream, Turn},
    BUILTIN_TOOLS,
};

/// The value of the series `series` (name and labels exactly as rendered).
pub(crate) fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn metrics_report_the_counts_of_known_conversations() {
    let mut turns = seed::turns();
    turns.push(Turn::status(400, "bad request"));
    turns.push(Turn::tool_calls(&[("c1", "no_such_tool", json!({}))]));
    turns.push(Turn::text("That tool does not exist."));
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;

    let seeded = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(seeded.done().1, "completed");
    let failed = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(failed.done().1, "provider_error");
    let unknown = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(unknown.done().1, "completed");
    assert!(!unknown.results()[0].1, "the unknown tool failed");
    upstream.assert_consumed();

    let response = host.get("/metrics").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    let expected = [
        ("rojos_chats_started_total", 3.0),
        (
            r#"rojos_chats_finished_total{stop_reason="completed"}"#,
            2.0,
        ),
        (
            r#"rojos_chats_finished_total{stop_reason="provider_error"}"#,
            1.0,
        ),
        ("rojos_model_turns_total", 6.0),
        ("rojos_model_turn_duration_seconds_count", 6.0),
        (
            r#"rojos_tool_calls_total{tool="create_directory",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_calls_total{tool="write_text_content",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_calls_total{tool="unknown",outcome="error"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_call_duration_seconds_count{tool="create_directory"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_call_duration_seconds_count{tool="write_text_content"}"#,
            1.0,
        ),
        (r#"rojos_provider_errors_total{kind="status"}"#, 1.0),
        ("rojos_streams_open", 0.0),
        ("rojos_plugins_loaded", BUILTIN_TOOLS.len() as f64),
    ];
    for (series, count) in expected {
        assert_eq!(value(&text, series), Some(count), "{series} in\n{text}");
    }
    for family in [
        "rojos_chats_started_total counter",
        "rojos_model_turn_duration_seconds histogram",
        "rojos_tool_call_duration_seconds histogram",
        "rojos_streams_open gauge",
    ] {
        assert!(
            text.lines().any(|l| l == format!("# TYPE {family}")),
            "# TYPE {family} in\n{text}"
        );
    }
}

#[tokio::test]
async fn metrics_need_a_valid_token_of_any_scope() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let anonymous = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let scoped = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 200);
    let text = scoped.text().await.unwrap();
    assert_eq!(value(&text, "rojos_chats_started_total"), Some(0.0));
}

/// Process `pid`'s `/proc/<pid>/stat` fields after its name and state (the kernel's field 4
/// onwards, so its field N is at index N - 4).
fn stat_fields(pid: u32) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The name is in parentheses and may hold spaces; the state letter after it is skipped.
    stat[stat.rfind(')').expect("a name") + 4..]
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// Process `pid`'s user and system time in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let fields = stat_fields(pid);
    // utime and stime are the kernel's fields 14 and 15.
    (fields[14 - 4] + fields[15 - 4]) as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// The number of entries in `/proc/<pid>/<dir>`.
fn entries(pid: u32, dir: &str) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/{dir}"))
        .expect("proc dir")
        .count() as f64
}

/// The real binary with the built-in tools, after one seeded conversation (so every per-reason
/// counter the conversation touches has a series); with its upstream and its folder, which
/// must live as long as it.
pub(crate) struct AfterOneChat {
    pub(crate) upstream: ScriptedUpstream,
    pub(crate) rojos: RunningBinary,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

pub(crate) async fn binary_after_one_chat() -> AfterOneChat {
    let upstream = ScriptedUpstream::start(seed::turns()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = HostConfig::builtins().upstream(&upstream);
    std::fs::write(dir.path().join("rojos.toml"), config.render()).expect("write config");
    let rojos = RunningBinary::start(dir.path(), "warn", &[]);
    let url = rojos.url();
    let stream = Stream::read(chat_at(&url, &seed::body("demo")).await).await;
    assert_eq!(stream.done().1, "completed");
    AfterOneChat {
        upstream,
        rojos,
        url,
        _dir: dir,
    }
}

#[tokio::test]
async fn the_binary_reports_its_own_cpu_memory_descriptors_threads_and_runtime() {
    let AfterOneChat {
        upstream,
        rojos,
        url,
        _dir,
    } = binary_after_one_chat().await;
    let pid = rojos.id();

    let (cpu_before, fds_before, threads_before) =
        (cpu_seconds(pid), entries(pid, "fd"), entries(pid, "task"));
    let text = get_at(&url, "/metrics").await.text().await.expect("a body");
    let (cpu_after, fds_after, threads_after) =
        (cpu_seconds(pid), entries(pid, "fd"), entries(pid, "task"));
    let read = |series: &str| value(&text, series).unwrap_or_else(|| panic!("{series}:\n{text}"));

    // The binary's own figures, not the test's: the kernel's count of its CPU time around the
    // scrape, its descriptors and threads (give or take the scrape's own connection and a
    // blocking thread started or ended meanwhile).
    let cpu = read("process_cpu_seconds_total");
    assert!(
        cpu_before - 0.011 <= cpu && cpu <= cpu_after + 0.011 && cpu > 0.0,
        "{cpu_before} <= {cpu} <= {cpu_after}"
    );
    let fds = read("process_open_fds");
    assert!(
        fds_before.min(fds_after) - 2.0 <= fds && fds <= fds_before.max(fds_after) + 2.0,
        "{fds} open descriptors against {fds_before}, {fds_after} in /proc/{pid}/fd"
    );
    let threads = read("process_threads");
    assert!(
        threads_before.min(threads_after) - 2.0 <= threads
            && threads <= threads_before.max(threads_after) + 2.0,
        "{threads} threads against {threads_before}, {threads_after} in /proc/{pid}/task"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let vm_rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .expect("VmRSS")
        * 1024.0;
    let rss = read("process_resident_memory_bytes");
    assert!(
        (rss - vm_rss).abs() < 8.0 * 1024.0 * 1024.0,
        "{rss} bytes resident against VmRSS {vm_rss}"
    );
    // Its start, from the kernel's start tick (field 22) and the machine's boot time.
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .expect("/proc/stat")
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .expect("btime");
    let started =
        boot + stat_fields(pid)[22 - 4] as f64 / rustix::param::clock_ticks_per_second() as f64;
    assert!(
        (read("process_start_time_seconds") - started).abs() <= 1.0,
        "started at {started}:\n{text}"
    );

    // The runtime ran the conversation and its workers slept between its steps.
    assert!(read("rojos_runtime_busy_seconds_total") > 0.0, "{text}");
    assert!(read("rojos_runtime_worker_parks_total") >= 1.0, "{text}");
    assert!(
        read("rojos_runtime_alive_tasks") >= 1.0,
        "the scrape's own connection"
    );
    upstream.assert_consumed();
}
