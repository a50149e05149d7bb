//! A plugin worker's life on a running host, as a user sees it: loading a library starts no
//! `exec` of the server's binary (its manifest is read in a worker the zygote forks); a call
//! its client stops, or leaves under `unattended_run_secs = 0`, ends the worker running it; a
//! project folder removed and made again at the same path gets a new worker, which sees the
//! new folder; a second call on a project runs in its worker beside one that hangs; a worker
//! whose plugin used up its descriptors still answers.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    hostile::{call, has_ended, processes, until, worker_pid},
    ndjson::read_until,
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

/// A link to the built `rojos` named for one test: its zygote and workers are found in
/// `/proc` by their command line, among those of the other tests running at once.
fn program(links: &Path, name: &str) -> PathBuf {
    let link = links.join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rojos"), &link).unwrap();
    link
}

/// A host whose built-ins, `hostile_tool` and `hang_tool` run in workers of `program`, on a
/// loader of its own, with `limits` in `[limits]`.
async fn host(upstream: &ScriptedUpstream, program: &Path, limits: &str) -> TestHost {
    let mut config = HostConfig::builtins()
        .upstream(upstream)
        .with(&format!("[limits]\n{limits}"));
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.load.push(plugin_lib("rojos_test_hang_tool"));
    config
        .plugins
        .push_str("isolation = \"worker\"\nworker_idle_secs = 3600\n");
    config.own_loader = true;
    config.worker_program = Some(program.to_owned());
    config.call_timeout_secs = 600.0;
    TestHost::start(config).await
}

/// How many threads `pid` has.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count)
}

/// Whether worker `pid` has started a spare serving thread (`call`): it does so when its
/// first serving thread takes a call.
fn has_spare_thread(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks.flatten().any(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim_end() == "call")
        })
    })
}

#[tokio::test]
async fn loading_plugins_in_workers_execs_no_worker_of_the_servers_binary() {
    // A program that notes the subcommand of each `exec`, then becomes the server's binary.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("execs.log");
    let program = dir.path().join("rojos-noting-execs");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            env!("CARGO_BIN_EXE_rojos")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "").await;

    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "hostile_tool"),
        "the libraries were loaded (their manifests read in workers)"
    );
    std::fs::create_dir_all(host.project_root("p")).unwrap();
    worker_pid(&host, &upstream, "p").await;
    let execs = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        execs.lines().collect::<Vec<_>>(),
        ["plugin-zygote"],
        "one zygote was started; every manifest and every worker came from it by fork"
    );
}

/// Starts a chat in `project` whose model calls `hang_tool` (an hour), and returns the
/// response (unread past its `TOOL_CALL`) and the pid of the worker running the call.
async fn hanging_call(
    host: &TestHost,
    upstream: &ScriptedUpstream,
    program: &Path,
    project: &str,
) -> (reqwest::Response, u32) {
    std::fs::create_dir_all(host.project_root(project)).unwrap();
    upstream.push([Turn::tool_calls(&[("c1", "hang_tool", json!({}))])]);
    let mut response = host
        .chat(json!({"projectId": project, "message": "hang"}))
        .await;
    read_until(&mut response, "TOOL_CALL").await;
    let mut pid = 0;
    // The worker runs the call once a spare thread waits for the next frame beside it.
    until("a worker runs hang_tool's call", || {
        pid = processes(program, "plugin-worker")
            .into_iter()
            .find(|pid| has_spare_thread(*pid))
            .unwrap_or(0);
        pid != 0
    })
    .await;
    (response, pid)
}

#[tokio::test]
async fn a_second_call_on_a_project_runs_in_its_worker_beside_one_that_hangs() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-life-beside");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "").await;
    let (hanging, pid) = hanging_call(&host, &upstream, &program, "p").await;

    upstream.push([
        Turn::tool_calls(&[("c2", "hang_tool", json!({"seconds": 0}))]),
        Turn::text("the second call returned"),
    ]);
    let second = tokio::time::timeout(Duration::from_secs(60), async {
        let response = host
            .chat(json!({"projectId": "p", "message": "do not hang"}))
            .await;
        response.text().await.unwrap()
    })
    .await
    .expect("the second call waited behind the hanging one for a minute");
    assert!(
        second.contains(r#"\"slept\":0.0"#) && second.contains(r#""stopReason":"completed""#),
        "the second call was answered while the first still ran: {second}"
    );
    assert_eq!(
        processes(&program, "plugin-worker"),
        [pid],
        "one worker served both calls on the project"
    );
    assert!(!has_ended(pid), "the hanging call still runs");
    drop(hanging);
}

#[tokio::test]
async fn a_call_its_client_stops_ends_the_worker_running_it() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-life-stop");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "").await;
    let (response, pid) = hanging_call(&host, &upstream, &program, "demo").await;
    let conversation = host.only_conversation().await;

    let stopped = host.stop_run(&conversation).await;
    assert_eq!(stopped.status(), 202);
    until("the worker running the stopped call has ended", || {
        has_ended(pid)
    })
    .await;
    // The rest of the stream (its start was read above).
    let rest = response.text().await.unwrap();
    assert!(
        rest.contains("\"stopReason\":\"cancelled\""),
        "the run ended as cancelled: {rest}"
    );
    assert!(
        rest.contains("was stopped while running this call: the run was stopped"),
        "the call's result says why: {rest}"
    );
}

#[tokio::test]
async fn a_call_whose_client_left_ends_the_worker_running_it() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-life-gone");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "unattended_run_secs = 0").await;
    let (response, pid) = hanging_call(&host, &upstream, &program, "p").await;

    drop(response);
    until("the worker running the abandoned call has ended", || {
        has_ended(pid)
    })
    .await;
}

#[tokio::test]
async fn a_project_folder_made_again_at_its_path_gets_a_new_worker_that_sees_it() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-life-remade");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "").await;
    let root = host.project_root("p");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("old.txt"), "the old folder").unwrap();
    let (ok, old) = call(
        &host,
        &upstream,
        "p",
        json!({"act": "read_root", "path": "old.txt"}),
    )
    .await;
    assert!(ok && old == "the old folder", "{old}");
    let first = worker_pid(&host, &upstream, "p").await;

    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("new.txt"), "the new folder").unwrap();
    let (ok, new) = call(
        &host,
        &upstream,
        "p",
        json!({"act": "read_root", "path": "new.txt"}),
    )
    .await;
    assert!(
        ok && new == "the new folder",
        "the call saw the new folder: {new}"
    );
    let second = worker_pid(&host, &upstream, "p").await;
    assert_ne!(first, second, "a new worker serves the new folder");
}

/// A plugin that uses up its worker's descriptors slows nothing but itself: the worker's next
/// serving thread, which can open no epoll set to wait in, reads the socket directly instead
/// and answers a call while the other two sleep.
#[tokio::test]
async fn a_worker_with_no_descriptors_left_still_answers_on_a_new_thread() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-life-no-files");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program, "").await;
    let pid = worker_pid(&host, &upstream, "p").await;
    let (ok, held) = call(&host, &upstream, "p", json!({"act": "exhaust_files"})).await;
    assert!(ok && held.starts_with("holding "), "{held}");
    let serving = threads(pid);

    // Two calls that sleep take the worker's two serving threads; it starts a third.
    let mut sleeping = Vec::new();
    for id in ["s1", "s2"] {
        upstream.push([Turn::tool_calls(&[(
            id,
            "hostile_tool",
            json!({"act": "sleep", "seconds": 60}),
        )])]);
        let mut response = host.chat(json!({"projectId": "p", "message": id})).await;
        read_until(&mut response, "TOOL_CALL").await;
        sleeping.push(response);
    }
    until("the worker started a third serving thread", || {
        threads(pid) > serving
    })
    .await;

    let (ok, answered_in) = tokio::time::timeout(
        Duration::from_secs(30),
        call(&host, &upstream, "p", json!({"act": "pid"})),
    )
    .await
    .expect("the third thread answered no call while the others slept");
    assert!(ok, "{answered_in}");
    assert_eq!(answered_in, pid.to_string(), "the same worker answered");
    drop(sleeping);
}
