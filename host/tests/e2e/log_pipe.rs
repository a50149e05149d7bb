//! A log reader that stops reading: the real binary with its stderr pipe held open and never
//! read keeps answering, and counts the log lines it had to drop
//! (`rojos_log_lines_dropped_total`; docs/configuration.md, "Logs and the command line").

use std::time::{Duration, Instant};

use crate::support::{
    binary::RunningBinary,
    host::{HostConfig, DEMO_TOKEN},
};

/// `rojos_log_lines_dropped_total` from the host at `url`. Once the pipe is full, a write on a
/// runtime thread waits for a reader that never comes: this request (like every other) would
/// then time out, and the test fail saying which one.
async fn dropped(client: &reqwest::Client, url: &str, request: u32) -> u64 {
    let response = client
        .get(format!("{url}/metrics"))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap_or_else(|e| panic!("request {request} failed while the log was not read: {e}"));
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("rojos_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rojos_log_lines_dropped_total in:\n{text}"))
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
        requests += 1;
        let count = dropped(&client, &url, requests).await;
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
    assert!(dropped(&client, &url, requests + 1).await >= count);
    eprintln!("{requests} requests until the first line was dropped; {count} dropped then");
}
