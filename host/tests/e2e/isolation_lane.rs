//! A changing call (one with undo's checkpoint work just before and after it) on a project
//! whose worker runs travels over the worker's lane (docs/plugins.md, "Isolation"): it runs
//! on the worker's lane thread while other calls come on the worker's socket, and a crash, a
//! deadline or a stopped run there ends as it does on the socket: the model reads why, the
//! worker is gone, and the next call gets a new one.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    hostile::{has_ended, until},
    ndjson::{read_until, Stream},
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// A host whose built-ins and `hostile_tool` run in workers, on a loader of its own (so the
/// crashes of other tests' workers do not count towards this one's quarantine).
fn config(upstream: &ScriptedUpstream) -> HostConfig {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    config.own_loader = true;
    config
}

/// `hostile_tool` doing `act`, as a call that changes `<id>.txt` (so the server records the
/// file around it; a path of its own, so no call repeats another).
fn changing(id: &str, act: Value) -> Turn {
    let mut args = act;
    args["changes"] = json!(format!("{id}.txt"));
    Turn::tool_calls(&[(id, "hostile_tool", args)])
}

/// One run in project `p` whose model makes `calls` one after another, then answers: each
/// call's result.
async fn run(calls: Vec<Turn>) -> (TestHost, Vec<String>) {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = TestHost::start(config(&upstream)).await;
    upstream.push(calls);
    upstream.push([Turn::text("done")]);
    std::fs::create_dir_all(host.project_root("p")).unwrap();
    let stream = Stream::read(host.chat(json!({"projectId": "p", "message": "go"})).await).await;
    assert_eq!(stream.text(), "done", "the run went on to its answer");
    let results = stream
        .results()
        .into_iter()
        .map(|(_, _, text)| text)
        .collect();
    (host, results)
}

fn pid(text: &str) -> u32 {
    text.parse().unwrap_or_else(|_| panic!("not a pid: {text}"))
}

#[tokio::test]
async fn a_changing_call_runs_on_the_workers_lane_and_other_calls_on_its_socket() {
    let (_host, threads) = run(vec![
        // No worker yet: the call that starts it comes on its socket.
        changing("t1", json!({"act": "thread"})),
        changing("t2", json!({"act": "thread"})),
        Turn::tool_calls(&[("t3", "hostile_tool", json!({"act": "thread"}))]),
        changing("t4", json!({"act": "thread"})),
    ])
    .await;
    assert_eq!(threads.len(), 4, "{threads:?}");
    assert_ne!(threads[0], "lane", "{threads:?}");
    assert_eq!(threads[1], "lane", "the worker ran: {threads:?}");
    assert_ne!(
        threads[2], "lane",
        "a call that changes nothing: {threads:?}"
    );
    assert_eq!(threads[3], "lane", "call after call: {threads:?}");
}

/// A changing call doing `act` on the lane between two calls that read the worker's pid: it
/// reads `message`, its worker ends, and the next call gets a new one.
async fn ends_its_worker_and_the_next_call_gets_a_new_one(act: &str, message: &str) {
    let (_host, results) = run(vec![
        changing("p1", json!({"act": "pid"})),
        changing("a1", json!({ "act": act })),
        changing("p2", json!({"act": "pid"})),
    ])
    .await;
    assert_eq!(results[1], message);
    until("the worker has ended", || has_ended(pid(&results[0]))).await;
    assert_ne!(pid(&results[0]), pid(&results[2]), "a new worker");
}

#[tokio::test]
async fn a_crash_on_the_lane_fails_only_its_call_and_the_next_call_gets_a_new_worker() {
    ends_its_worker_and_the_next_call_gets_a_new_one(
        "segv",
        "error: the tool plugin 'hostile_tool' crashed (SIGSEGV) while running this call; it is started again for the next call",
    )
    .await;
}

#[tokio::test]
async fn a_plugin_that_closes_the_lane_under_its_call_is_ended_at_the_deadline() {
    ends_its_worker_and_the_next_call_gets_a_new_one(
        "close_lane",
        "error: the tool plugin 'hostile_tool' was ended: it closed its call channel while running this call; it is started again for the next call",
    )
    .await;
}

#[tokio::test]
async fn a_plugin_that_garbles_the_lane_is_ended_and_named() {
    let (_host, results) = run(vec![
        changing("p1", json!({"act": "pid"})),
        changing("g1", json!({"act": "garble_lane"})),
    ])
    .await;
    assert!(
        results[1].starts_with(
            "error: the tool plugin 'hostile_tool' was ended: it broke the call protocol ("
        ) && !results[1].contains("hello"),
        "{results:?}"
    );
    until("the worker has ended", || has_ended(pid(&results[0]))).await;
}

#[tokio::test]
async fn a_changing_call_past_its_deadline_on_the_lane_ends_its_worker() {
    let (_host, results) = run(vec![
        changing("p1", json!({"act": "pid"})),
        changing("s1", json!({"act": "spin"})),
    ])
    .await;
    assert_eq!(
        results[1],
        "error: tool hostile_tool did not finish within 2.0 s; its worker was stopped"
    );
    let worker = pid(&results[0]);
    until("the spinning worker has ended", || has_ended(worker)).await;
}

#[tokio::test]
async fn a_run_stopped_while_its_changing_call_runs_on_the_lane_ends_the_worker() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let mut config = config(&upstream);
    config.call_timeout_secs = 600.0;
    let host = TestHost::start(config).await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    upstream.push([
        changing("p1", json!({"act": "pid"})),
        changing(
            "s1",
            json!({"act": "sleep", "seconds": 60, "path": "begun.txt"}),
        ),
    ]);
    let mut response = host
        .chat(json!({"projectId": "demo", "message": "go"}))
        .await;
    let seen = read_until(&mut response, "TOOL_RESULT").await;
    until("the sleeping call has begun", || {
        root.join("begun.txt").exists()
    })
    .await;

    let conversation = host.only_conversation().await;
    let stopped = host.stop_run(&conversation).await;
    assert_eq!(stopped.status(), 202);
    let rest = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the stopped run ended before its call's 60 s")
        .unwrap();
    let run = Stream::parse(&format!("{seen}{rest}"));
    let results = run.results();
    assert!(
        results[1]
            .2
            .contains("was stopped while running this call: the run was stopped"),
        "{results:?}"
    );
    let worker = pid(&results[0].2);
    until("the stopped call's worker has ended", || has_ended(worker)).await;
}
