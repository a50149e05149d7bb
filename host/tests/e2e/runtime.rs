//! The real binary's runtime: it runs the number of workers `[server] worker_threads` asks
//! for, as `/metrics` reports them, and a conversation with tool calls completes on a single
//! worker.

use crate::support::{
    binary::RunningBinary,
    host::{chat_at, client, HostConfig, TOKEN},
    ndjson::Stream,
    seed,
    upstream::ScriptedUpstream,
};

/// The value of `series` in the running server's `/metrics`.
async fn metric(url: &str, series: &str) -> String {
    let text = client()
        .get(format!("{url}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the server answers")
        .text()
        .await
        .expect("a body");
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .to_owned()
}

#[tokio::test]
async fn the_binary_runs_the_configured_number_of_workers() {
    // Three: more than this two-core machine's default, so it is the setting that shows.
    for workers in [1, 3] {
        let upstream = ScriptedUpstream::start(seed::turns()).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let config = HostConfig::builtins()
            .upstream(&upstream)
            .server(&format!("worker_threads = {workers}"));
        std::fs::write(dir.path().join("rojos.toml"), config.render()).expect("write config");
        let rojos = RunningBinary::start(dir.path(), "warn", &[]);
        let url = rojos.url();

        assert_eq!(
            metric(&url, "rojos_runtime_workers").await,
            workers.to_string()
        );
        let stream = Stream::read(chat_at(&url, &seed::body("demo")).await).await;
        assert_eq!(stream.done().1, "completed", "with {workers} worker(s)");
        assert_eq!(stream.results().len(), 2, "both tool calls ran");
        upstream.assert_consumed();
    }
}
