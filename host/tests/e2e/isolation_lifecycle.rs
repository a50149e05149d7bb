//! A plugin worker's life cycle on a running host: a replaced file gets a new worker while the
//! call in flight finishes on the old one; a worker of a server running as root keeps no
//! capability.

use std::{future::Future, path::Path, time::Duration};

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::Stream,
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// Polls `check` until it holds (the watcher needs a quiet period), or panics after 15 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Copies `lib` with `padding` zero bytes appended (another content, the same code) into the
/// drop-in folder as `name`, under a dot-name first, then renamed.
fn deploy(host: &TestHost, lib: &Path, name: &str, padding: usize) {
    let tmp = host.dropin_dir().join(format!(".{name}.tmp"));
    let mut bytes = std::fs::read(lib).unwrap();
    bytes.extend(std::iter::repeat_n(0u8, padding));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, host.dropin_dir().join(name)).unwrap();
}

/// A host with only `hostile_tool`, from the drop-in folder, on a loader of its own.
async fn dropin_host(upstream: &ScriptedUpstream) -> TestHost {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.clear();
    config.own_loader = true;
    config.dropin = true;
    config.call_timeout_secs = 20.0;
    let host = TestHost::start(config).await;
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    host
}

async fn hostile_listed(host: &TestHost) -> bool {
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    tools
        .iter()
        .any(|t| t["function"]["name"] == "hostile_tool")
}

/// One chat in `victim` calling `hostile_tool` with `args`: whether it succeeded, the result.
async fn call(host: &TestHost, upstream: &ScriptedUpstream, args: Value) -> (bool, String) {
    upstream.push([
        Turn::tool_calls(&[("h1", "hostile_tool", args)]),
        Turn::text("done"),
    ]);
    let stream = Stream::read(
        host.chat(json!({"projectId": "victim", "message": "go"}))
            .await,
    )
    .await;
    let (_, ok, result) = stream.results()[0].clone();
    (ok, result)
}

#[tokio::test]
async fn a_replaced_file_gets_a_new_worker_while_the_call_in_flight_finishes_on_the_old_one() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = dropin_host(&upstream).await;
    let hostile = plugin_lib("rojos_test_hostile_tool");
    deploy(&host, &hostile, "libhostile.so", 11);
    eventually("hostile_tool is offered", || async {
        hostile_listed(&host).await
    })
    .await;
    let (ok, old) = call(&host, &upstream, json!({"act": "pid"})).await;
    assert!(ok, "{old}");

    // A long call on the old library's worker, in flight while the file is replaced; its
    // model's answer is queued only after the calls below took their turns.
    upstream.push([Turn::tool_calls(&[(
        "s1",
        "hostile_tool",
        json!({"act": "sleep", "seconds": 6}),
    )])]);
    let base = upstream.received().len();
    let response = host
        .chat(json!({"projectId": "victim", "message": "sleep"}))
        .await;
    let sleeping = tokio::spawn(Stream::read(response));
    upstream.until_received(base + 1).await;
    deploy(&host, &hostile, "libhostile.so", 12);

    // The new file is served by a new worker, while the old call still runs.
    let mut served_by_new = false;
    for _ in 0..300 {
        let (ok, pid) = call(&host, &upstream, json!({"act": "pid"})).await;
        assert!(ok, "{pid}");
        if pid != old {
            served_by_new = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served_by_new, "a new worker serves the replaced file");
    upstream.push([Turn::text("slept")]);
    assert!(
        !sleeping.is_finished(),
        "the old call was still running when the new worker served"
    );
    let slept = sleeping.await.unwrap();
    assert_eq!(
        slept.results()[0],
        ("hostile_tool".to_owned(), true, format!("slept in {old}")),
        "the call in flight finished on the old worker"
    );
}

#[tokio::test]
async fn a_worker_keeps_no_capability() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = dropin_host(&upstream).await;
    deploy(
        &host,
        &plugin_lib("rojos_test_hostile_tool"),
        "libhostile.so",
        13,
    );
    eventually("hostile_tool is offered", || async {
        hostile_listed(&host).await
    })
    .await;
    let (ok, caps) = call(&host, &upstream, json!({"act": "caps"})).await;
    assert!(ok, "{caps}");
    // As root (this machine and CI) the server has every capability; its workers none.
    assert_eq!(caps, "effective=0 permitted=0 bounding=0 ambient=0");
}
