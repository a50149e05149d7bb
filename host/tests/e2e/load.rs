//! Load held: 300 seed conversations streamed at once through the real host and plugins,
//! each in its own project, against a stateless scripted upstream. Every stream must be
//! complete and valid, every page written, and nothing left open afterwards. Figures live in
//! the benchmark (`rojos-bench`), not here.

use std::collections::HashSet;

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::Stream,
    seed,
    upstream::ScriptedUpstream,
};

const STREAMS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_concurrent_streams_all_complete_and_valid() {
    rojos::raise_open_files_limit().expect("raise the open files limit");
    let upstream = ScriptedUpstream::start_by_step(seed::turns()).await;
    // One token opens every stream: its own cap must not be what is tested here. Nor is
    // speed: a call may take a minute (not the test host's 2 s) while 300 conversations
    // record their changes on a busy machine's disk.
    let mut config = HostConfig::builtins()
        .upstream(&upstream)
        .server(&format!("max_chats_per_token = {STREAMS}"));
    config.call_timeout_secs = 60.0;
    let host = TestHost::start(config).await;
    let client = crate::support::host::client();

    let streams: Vec<_> = (0..STREAMS)
        .map(|i| {
            let request = client
                .post(format!("{}/chat", host.url))
                .bearer_auth(crate::support::host::TOKEN)
                .json(&seed::body(&format!("load-{i}")));
            tokio::spawn(async move {
                let response = request.send().await.expect("request reaches the host");
                Stream::read(response).await
            })
        })
        .collect();
    let mut conversations = HashSet::new();
    for (i, stream) in streams.into_iter().enumerate() {
        let stream = stream.await.unwrap_or_else(|e| panic!("stream {i}: {e}"));
        let (conversation, stop) = stream.done();
        assert_eq!(stop, "completed", "stream {i}: {:#?}", stream.events);
        assert!(
            stream.errors().is_empty(),
            "stream {i}: {:?}",
            stream.errors()
        );
        let results = stream.results();
        assert_eq!(results.len(), 2, "stream {i}");
        assert!(
            results.iter().all(|(_, ok, _)| *ok),
            "stream {i}: {results:?}"
        );
        assert_eq!(stream.text(), seed::ANSWER, "stream {i}");
        conversations.insert(conversation);
    }
    assert_eq!(conversations.len(), STREAMS, "one conversation each");
    for i in 0..STREAMS {
        let page = host
            .project_root(&format!("load-{i}"))
            .join("docs/intro/index.page");
        assert_eq!(
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display())),
            seed::PAGE
        );
    }

    let metrics = host.get("/metrics").await.text().await.unwrap();
    for line in [
        format!(r#"rojos_chats_finished_total{{stop_reason="completed"}} {STREAMS}"#),
        "rojos_streams_open 0".to_owned(),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    assert_eq!(upstream.received().len(), 3 * STREAMS);
}
