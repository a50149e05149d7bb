//! Plugins in sandboxed workers on a running host: a hostile plugin's call (a crash, an
//! abort, an exit, an endless loop, 3 GiB, reading another project or the system, the
//! environment, the network, a fork, a write outside the root, the server's environ) ends
//! with an error result the model reads, while a bystander conversation in another project,
//! caught mid-run, completes untouched; the next call gets a new worker. A result longer than
//! the worker's channel carries is cut, not taken for a crash.

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    hostile,
    ndjson::{read_until, Stream},
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// What the bystander's model answers, once released.
const BYSTANDER_ANSWER: &str = "the bystander's answer, complete";

/// A host whose `load` plugins (the built-ins and `hostile_tool`) all run in workers.
async fn host(upstream: &ScriptedUpstream) -> TestHost {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    TestHost::start(config).await
}

/// Runs one `hostile_tool` call with `args` in project `victim` while a bystander run in
/// project `bystander` waits mid-stream for its model's last turn; returns the hostile call's
/// result text and checks that the bystander then completes and the model read the result.
async fn hostile_call(args: Value) -> (TestHost, String) {
    hostile_call_with(|_| args).await
}

/// [`hostile_call`] with arguments made once the host (and its folder) exists.
async fn hostile_call_with(args: impl FnOnce(&TestHost) -> Value) -> (TestHost, String) {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream).await;
    upstream.push([
        Turn::tool_calls(&[("b1", "list_files", json!({"path": "."}))]),
        Turn::text(BYSTANDER_ANSWER).held(),
        Turn::tool_calls(&[("h1", "hostile_tool", args(&host))]),
        Turn::text("done"),
    ]);
    let text = run_against(&host, &upstream).await;
    (host, text)
}

async fn run_against(host: &TestHost, upstream: &ScriptedUpstream) -> String {
    let base = upstream.received().len();
    std::fs::create_dir_all(host.project_root("bystander")).unwrap();
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    let mut bystander = host
        .chat(json!({"projectId": "bystander", "message": "list"}))
        .await;
    // Mid-run: its tool call is done and its model's answer is held back.
    let seen = read_until(&mut bystander, "TOOL_RESULT").await;
    upstream.until_received(base + 2).await;

    let hostile = Stream::read(
        host.chat(json!({"projectId": "victim", "message": "misbehave"}))
            .await,
    )
    .await;
    let (name, _, result) = hostile.results()[0].clone();
    assert_eq!(name, "hostile_tool");
    assert_eq!(hostile.text(), "done", "the run went on to its answer");
    let read_by_model = &upstream.received()[base + 3].body["messages"];
    let last = read_by_model.as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], result, "the model read the result");

    upstream.release();
    let rest = bystander
        .text()
        .await
        .expect("the bystander's stream goes on");
    let bystander = Stream::parse(&format!("{seen}{rest}"));
    assert_eq!(
        bystander.text(),
        BYSTANDER_ANSWER,
        "the bystander completed"
    );
    result
}

fn assert_error(result: &str, expected: &str) {
    assert!(
        result.starts_with("error: ") && result.contains(expected),
        "expected an error result with {expected:?}, got {result:?}"
    );
}

#[tokio::test]
async fn a_segfault_fails_only_its_call_and_the_next_call_gets_a_new_worker() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("b1", "list_files", json!({"path": "."}))]),
        Turn::text(BYSTANDER_ANSWER).held(),
        Turn::tool_calls(&[("h1", "hostile_tool", json!({"act": "segv"}))]),
        Turn::text("done"),
        Turn::tool_calls(&[(
            "h2",
            "hostile_tool",
            json!({"act": "read_root", "path": "note.txt"}),
        )]),
        Turn::text("done again"),
    ])
    .await;
    let host = host(&upstream).await;
    let result = run_against(&host, &upstream).await;
    assert_eq!(
        result,
        "error: the tool plugin 'hostile_tool' crashed (SIGSEGV) while running this call; it is started again for the next call"
    );
    std::fs::write(host.project_root("victim").join("note.txt"), "kept").unwrap();
    let again = Stream::read(
        host.chat(json!({"projectId": "victim", "message": "again"}))
            .await,
    )
    .await;
    assert_eq!(
        again.results()[0].2,
        "kept",
        "a new worker serves the project"
    );
}

#[tokio::test]
async fn an_abort_fails_only_its_call() {
    let (_host, result) = hostile_call(json!({"act": "abort"})).await;
    assert_error(&result, "the tool plugin 'hostile_tool' crashed (SIGABRT");
}

#[tokio::test]
async fn an_exit_fails_only_its_call() {
    let (_host, result) = hostile_call(json!({"act": "exit"})).await;
    assert_error(
        &result,
        "the tool plugin 'hostile_tool' exited with status 3 while running this call",
    );
}

#[tokio::test]
async fn an_endless_loop_is_stopped_at_the_deadline() {
    let (_host, result) = hostile_call(json!({"act": "spin"})).await;
    assert_eq!(
        result,
        "error: tool hostile_tool did not finish within 2.0 s; its worker was stopped"
    );
}

#[tokio::test]
async fn the_worker_of_a_call_past_its_deadline_is_gone() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("p1", "hostile_tool", json!({"act": "pid"}))]),
        Turn::text("noted"),
        Turn::tool_calls(&[("s1", "hostile_tool", json!({"act": "spin"}))]),
        Turn::text("gave up"),
    ])
    .await;
    let host = host(&upstream).await;
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    let chat = || async {
        Stream::read(
            host.chat(json!({"projectId": "victim", "message": "go"}))
                .await,
        )
        .await
    };
    let first = chat().await.results()[0].2.clone();
    let pid: u32 = first
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {first}"));
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc.exists(), "the worker runs");
    let spun = chat().await;
    assert!(
        spun.results()[0].2.contains("its worker was stopped"),
        "{spun:?}"
    );
    // Killed and reaped: nothing is left running the plugin's code.
    for _ in 0..200 {
        if !proc.exists() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("worker {pid} still exists after its call's deadline");
}

#[tokio::test]
async fn three_gib_is_refused_by_the_workers_memory_limit() {
    let (_host, result) = hostile_call(json!({"act": "alloc"})).await;
    assert_error(
        &result,
        "crashed (SIGABRT: memory allocation of 3221225472 bytes failed)",
    );
}

#[tokio::test]
async fn another_projects_file_cannot_be_read() {
    let (host, result) = hostile_call_with(|host| {
        let other = host.project_root("bystander").join("secret.txt");
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, "the bystander's secret").unwrap();
        json!({"act": "read", "path": other.display().to_string()})
    })
    .await;
    assert_error(&result, "failed: Permission denied");
    drop(host);
}

#[tokio::test]
async fn the_systems_files_cannot_be_read() {
    let (_host, result) = hostile_call(json!({"act": "read", "path": "/etc/passwd"})).await;
    assert_error(&result, "failed: Permission denied");
}

#[tokio::test]
async fn the_environment_is_empty() {
    let (_host, result) = hostile_call(json!({"act": "env"})).await;
    assert_eq!(result, "[]");
}

#[tokio::test]
async fn the_servers_environ_cannot_be_read() {
    let (_host, result) = hostile_call(json!({"act": "parent_environ"})).await;
    assert_error(&result, "failed: Permission denied");
}

#[tokio::test]
async fn no_tcp_connection_to_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_host, result) = hostile_call(json!({"act": "connect", "port": port})).await;
    assert_error(&result, "failed: Operation not permitted");
}

#[tokio::test]
async fn no_fork_and_no_exec() {
    let (_host, result) = hostile_call(json!({"act": "fork"})).await;
    assert_error(&result, "failed: Operation not permitted");
    let (_host, result) = hostile_call(json!({"act": "spawn"})).await;
    assert_error(&result, "failed: ");
}

#[tokio::test]
async fn no_write_outside_the_root() {
    let (host, result) = hostile_call_with(|host| {
        let planted = host.dir.path().join("planted.txt");
        json!({"act": "write", "path": planted.display().to_string()})
    })
    .await;
    assert_error(&result, "failed: Permission denied");
    assert!(
        !host.dir.path().join("planted.txt").exists(),
        "nothing written outside the root"
    );
}

/// The built-in file tools work unchanged from a worker: a file is created, replaced and read
/// back, and no temporary file is left beside it (a write once linked its unnamed temporary
/// file into place through `/proc`, which the worker's sandbox does not reach); and undo
/// takes the run's changes back, as the server recorded them around the worker's calls.
#[tokio::test]
async fn the_file_tools_create_and_replace_files_from_a_worker() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            "w1",
            "write_text_content",
            json!({"path": "docs/a.txt", "text": "first"}),
        )]),
        Turn::tool_calls(&[(
            "w2",
            "write_text_content",
            json!({"path": "docs/a.txt", "text": "second"}),
        )]),
        Turn::tool_calls(&[("r1", "get_text_content", json!({"path": "docs/a.txt"}))]),
        Turn::text("done"),
    ])
    .await;
    let host = host(&upstream).await;
    let root = host.project_root("writer");
    std::fs::create_dir_all(&root).unwrap();
    let run = Stream::read(
        host.chat(json!({"projectId": "writer", "message": "write"}))
            .await,
    )
    .await;
    let results = run.results();
    assert_eq!(results.len(), 3, "{results:?}");
    for (name, ok, result) in &results {
        assert!(ok, "{name}: {result}");
    }
    assert!(results[2].2.contains("second"), "{results:?}");
    assert_eq!(run.text(), "done");
    assert_eq!(
        std::fs::read_to_string(root.join("docs/a.txt")).unwrap(),
        "second"
    );
    let left: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["a.txt"], "nothing but the file");

    // The server recorded each change around the worker's call: undo takes the run back.
    let (conversation, _) = run.done();
    let (status, body) = crate::undo::undo(&host, &conversation, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !root.join("docs/a.txt").exists(),
        "the file the run created is gone again"
    );
}

/// A result longer than the worker's channel carries (64 MiB a frame) reaches the model cut,
/// as one from the server's process is, with the marker saying so: the worker is not taken
/// for crashed, and its next call runs in it.
#[tokio::test]
async fn a_result_longer_than_a_frame_is_cut_not_taken_for_a_crash() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let mut config = HostConfig::builtins().upstream(&upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    // Time to make, encode and send 70 MiB in a debug build.
    config.call_timeout_secs = 120.0;
    let host = TestHost::start(config).await;
    let (ok, first) = hostile::call(&host, &upstream, "victim", json!({"act": "pid"})).await;
    assert!(ok, "{first}");
    let (ok, result) = hostile::call(
        &host,
        &upstream,
        "victim",
        json!({"act": "big_result", "bytes": 70 << 20}),
    )
    .await;
    assert!(ok, "{}", &result[..result.len().min(300)]);
    assert!(result.starts_with("xxxx"), "{}", &result[..300]);
    assert!(
        result.len() < 1 << 20,
        "cut to max_result_bytes: {} bytes",
        result.len()
    );
    let (ok, again) = hostile::call(&host, &upstream, "victim", json!({"act": "pid"})).await;
    assert!(ok, "{again}");
    assert_eq!(again, first, "the same worker served the next call");
}
