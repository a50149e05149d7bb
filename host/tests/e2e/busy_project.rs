//! A changing call while its project's lock is held elsewhere (an undo on another host of the
//! fleet, which holds `<storage>/<project>/changes.lock`), in the server's process and in a
//! worker: the call waits for the lock only until its deadline, then the model reads that it
//! was not run and is safe to call again; a run stopped while its call waits ends without the
//! call; and once the lock is free, neither call's plugin runs after all.

use std::{fs::File, time::Duration};

use serde_json::json;

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::{read_until, Stream},
    upstream::{ScriptedUpstream, Turn},
};

/// A host of the built-ins, in workers or in the server's process, whose calls have
/// `timeout_secs`.
async fn host(upstream: &ScriptedUpstream, in_workers: bool, timeout_secs: f64) -> TestHost {
    let mut config = HostConfig::builtins().upstream(upstream);
    if in_workers {
        config.plugins.push_str("isolation = \"worker\"\n");
    }
    config.call_timeout_secs = timeout_secs;
    TestHost::start(config).await
}

/// The project's lock as another host's undo holds it: the whole `flock` of its lock file.
fn hold_project_lock(host: &TestHost, project: &str) -> File {
    let root = host.project_root(project);
    std::fs::create_dir_all(&root).unwrap();
    let file = File::create(root.parent().unwrap().join("changes.lock")).unwrap();
    file.lock().unwrap();
    file
}

/// A write of `path` with `text`, then the model's answer.
fn write_turns(id: &str, path: &str, text: &str) -> [Turn; 2] {
    [
        Turn::tool_calls(&[(
            id,
            "write_text_content",
            json!({"path": path, "text": text}),
        )]),
        Turn::text("done"),
    ]
}

/// Runs a chat in `project` whose model writes `path`, and checks it succeeds: by then any
/// earlier call left waiting for the lock has gone its way.
async fn write_now(host: &TestHost, upstream: &ScriptedUpstream, project: &str, path: &str) {
    upstream.push(write_turns("now", path, "now"));
    let run = Stream::read(
        host.chat(json!({"projectId": project, "message": "write now"}))
            .await,
    )
    .await;
    let results = run.results();
    assert!(results.len() == 1 && results[0].1, "{results:?}");
    assert!(host.project_root(project).join(path).exists());
}

async fn a_call_past_its_deadline_waiting_for_the_lock_is_not_run(in_workers: bool) {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, in_workers, 1.0).await;
    let lock = hold_project_lock(&host, "demo");
    upstream.push(write_turns("late", "late.txt", "late"));

    // The run ends while the lock is still held: the call did not wait for it past its
    // deadline (without that, this waits until the minute is up).
    let run = tokio::time::timeout(Duration::from_secs(60), async {
        Stream::read(
            host.chat(json!({"projectId": "demo", "message": "write"}))
                .await,
        )
        .await
    })
    .await
    .expect("the call waited for the project's lock past its deadline");
    let results = run.results();
    assert_eq!(results.len(), 1, "{results:?}");
    let (name, ok, result) = &results[0];
    assert_eq!(name, "write_text_content");
    assert!(!ok, "{result}");
    assert!(
        result.contains("was not run: it could not start within 1.0 s")
            && result.contains("nothing was changed, so it is safe to call it again"),
        "{result}"
    );
    assert_eq!(run.text(), "done");

    drop(lock);
    write_now(&host, &upstream, "demo", "now.txt").await;
    assert!(
        !host.project_root("demo").join("late.txt").exists(),
        "the call reported as not run never ran once the lock was free"
    );
}

#[tokio::test]
async fn in_process_a_call_past_its_deadline_waiting_for_the_lock_is_not_run() {
    a_call_past_its_deadline_waiting_for_the_lock_is_not_run(false).await;
}

#[tokio::test]
async fn in_a_worker_a_call_past_its_deadline_waiting_for_the_lock_is_not_run() {
    a_call_past_its_deadline_waiting_for_the_lock_is_not_run(true).await;
}

async fn a_run_stopped_while_its_call_waits_for_the_lock_ends_without_it(in_workers: bool) {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, in_workers, 600.0).await;
    let lock = hold_project_lock(&host, "demo");
    // Only the call: the stopped run asks its model nothing more.
    let [call, _] = write_turns("waits", "stopped.txt", "stopped");
    upstream.push([call]);
    let mut response = host
        .chat(json!({"projectId": "demo", "message": "write"}))
        .await;
    read_until(&mut response, "TOOL_CALL").await;
    let conversation = host.only_conversation().await;

    let stopped = host.stop_run(&conversation).await;
    assert_eq!(stopped.status(), 202);
    let rest = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stopped run waited for the project's lock")
        .unwrap();
    assert!(
        rest.contains("\"stopReason\":\"cancelled\""),
        "the run ended as cancelled: {rest}"
    );
    assert!(
        rest.contains("was not run: the run was stopped while the call waited to start"),
        "the call's result says why: {rest}"
    );

    drop(lock);
    write_now(&host, &upstream, "demo", "now.txt").await;
    assert!(
        !host.project_root("demo").join("stopped.txt").exists(),
        "the stopped run's call never ran once the lock was free"
    );
}

#[tokio::test]
async fn in_process_a_run_stopped_while_its_call_waits_for_the_lock_ends_without_it() {
    a_run_stopped_while_its_call_waits_for_the_lock_ends_without_it(false).await;
}

#[tokio::test]
async fn in_a_worker_a_run_stopped_while_its_call_waits_for_the_lock_ends_without_it() {
    a_run_stopped_while_its_call_waits_for_the_lock_ends_without_it(true).await;
}
