//! A log reader that stops reading: the real binary with its stderr pipe held open and never
//! read keeps answering, and counts the log lines it had to drop
//! (`rojos_log_lines_dropped_total`; docs/configuration.md, "Logs and the command line").

use std::time::{Duration, Instant};

use crate::support::{
    binary::RunningBinary,
    host::{HostConfig, DEMO_TOKEN},
};

/// The value of `rojos_log_lines_dropped_total` in a `/metrics` text.
fn dropped(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("rojos_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn a_log_nobody_reads_neither_stops_the_server_nor_grows_without_bound() {
    let dir = HostConfig::builtins().in_temp_folder();
    std::fs::create_dir_all(dir.path().join("storage/demo/root")).unwrap();
    // `trace` for everything: each request logs several lines, so the pipe's 64 KiB and the
    // writer's queue fill within a few thousand requests.
    let binary = RunningBinary::start_unread_log(dir.path(), "trace");
    let url = binary.url();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let started = Instant::now();
    let mut requests = 0u32;
    let count = loop {
        // Once the pipe is full, a write on a runtime thread waits for a reader that never
        // comes: this request (and every other) would then time out.
        let response = client
            .get(format!("{url}/metrics"))
            .bearer_auth(DEMO_TOKEN)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!("request {requests} failed while the log was not read: {e}")
            });
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        requests += 1;
        let count = dropped(&text).expect("rojos_log_lines_dropped_total is reported");
        if count > 0 {
            break count;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no log line was dropped after {requests} requests: the log did not fill the pipe \
             and the writer's queue, so this test proved nothing"
        );
    };
    // Still serving, and the count only grows.
    for _ in 0..20 {
        let health = client.get(format!("{url}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
    }
    let text = client
        .get(format!("{url}/metrics"))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(dropped(&text).unwrap() >= count, "{text}");
    eprintln!("{requests} requests until the first line was dropped; {count} dropped then");
}
