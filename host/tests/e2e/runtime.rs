//! The real binary's runtime: it runs the number of workers `[server] worker_threads` asks
//! for, as `/metrics` reports them, and a conversation with tool calls completes with each
//! count, a single worker included. And the harness's own promise about it: a server a
//! killed test process leaves behind is ended by its guardian.

use crate::metrics::value;
use crate::support::{
    binary::RunningBinary,
    host::{chat_at, get_at, HostConfig},
    ndjson::Stream,
    seed,
    upstream::ScriptedUpstream,
};

#[tokio::test]
async fn the_binary_runs_the_configured_number_of_workers() {
    // One, and one more than this machine's cores, which is never the default (one per core).
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for workers in [1, cores + 1] {
        let upstream = ScriptedUpstream::start(seed::turns()).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = HostConfig::builtins()
            .upstream(&upstream)
            .server(&format!("worker_threads = {workers}"));
        std::fs::write(dir.path().join("rojos.toml"), config.render()).expect("write config");
        let rojos = RunningBinary::start(dir.path(), "warn", &[]);
        let url = rojos.url();

        let text = get_at(&url, "/metrics").await.text().await.expect("a body");
        assert_eq!(
            value(&text, "rojos_runtime_workers"),
            Some(workers as f64),
            "{text}"
        );
        let stream = Stream::read(chat_at(&url, &seed::body("demo")).await).await;
        assert_eq!(stream.done().1, "completed", "with {workers} worker(s)");
        assert_eq!(stream.results().len(), 2, "both tool calls ran");
        upstream.assert_consumed();
    }
}

#[tokio::test]
async fn a_server_a_killed_test_process_leaves_behind_is_ended_by_its_guardian() {
    use std::os::unix::process::ExitStatusExt;
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = HostConfig::builtins().upstream(&upstream);
    std::fs::write(dir.path().join("rojos.toml"), config.render()).expect("write config");
    let mut rojos = RunningBinary::start(dir.path(), "warn", &[]);
    rojos.url();
    assert!(rojos.ended_within(std::time::Duration::ZERO).is_none());
    // The test process's end, as its guardian sees it: its input closes without a word.
    rojos.orphan();
    let ended = rojos.ended_within(std::time::Duration::from_secs(30));
    assert_eq!(
        ended.and_then(|status| status.signal()),
        Some(9),
        "the guardian kills the server: {ended:?}"
    );
}
