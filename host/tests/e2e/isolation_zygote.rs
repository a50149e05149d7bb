//! The plugin zygote on a running host: workers are forked by one zygote and are the
//! server's own children; a zygote that dies is started again for the next worker while the
//! workers it forked keep serving; a forked worker reaches only its own project, even though
//! the zygote served another; and a library's constructors run only in the confined child,
//! never in the zygote.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    hostile::{call, processes, worker_pid},
    plugin_lib,
    upstream::ScriptedUpstream,
};

/// A link to the built `rojos` named for one test: its zygote and workers are found in
/// `/proc` by their command line, among those of the other tests running at once.
fn program(links: &Path, name: &str) -> PathBuf {
    let link = links.join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rojos"), &link).unwrap();
    link
}

/// A host whose built-ins and `hostile_tool` run in workers forked by a zygote of `program`
/// (the default start), on a loader of its own.
async fn host(upstream: &ScriptedUpstream, program: &Path) -> TestHost {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    config.own_loader = true;
    config.worker_program = Some(program.to_owned());
    config.call_timeout_secs = 20.0;
    TestHost::start(config).await
}

/// `PPid` of `pid`.
fn parent(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// The only zygote of `program`.
fn the_zygote(program: &Path) -> u32 {
    let zygotes = processes(program, "plugin-zygote");
    assert_eq!(
        zygotes.len(),
        1,
        "one zygote of {}: {zygotes:?}",
        program.display()
    );
    zygotes[0]
}

/// A worker forked by the zygote of `program`, as a child of the server (this process).
fn assert_forked(program: &Path, pid: u32) {
    assert!(
        processes(program, "plugin-worker").contains(&pid),
        "worker {pid} was forked by the zygote of {}",
        program.display()
    );
    assert_eq!(parent(pid), std::process::id(), "the server's own child");
}

#[tokio::test]
async fn a_dead_zygote_is_started_again_and_the_workers_it_forked_keep_serving() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-zygote-death");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program).await;

    let first = worker_pid(&host, &upstream, "first").await;
    assert_forked(&program, first);
    let zygote = the_zygote(&program);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(zygote).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    for _ in 0..400 {
        if processes(&program, "plugin-zygote").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        processes(&program, "plugin-zygote").is_empty(),
        "the zygote was killed"
    );

    // A new project needs a new worker: a new zygote forks it.
    let second = worker_pid(&host, &upstream, "second").await;
    assert_forked(&program, second);
    assert_ne!(the_zygote(&program), zygote, "a new zygote");
    // The first project's worker was the server's child, not the zygote's: it still serves.
    assert_eq!(worker_pid(&host, &upstream, "first").await, first);
}

#[tokio::test]
async fn a_forked_worker_reaches_only_its_own_project_though_the_zygote_served_another() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-zygote-projects");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program).await;
    let secret = host.project_root("bystander").join("secret.txt");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "the bystander's secret").unwrap();
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    std::fs::write(host.project_root("victim").join("mine.txt"), "my own file").unwrap();

    // The zygote forks the bystander's worker first, then the victim's.
    let bystander = worker_pid(&host, &upstream, "bystander").await;
    let (ok, own) = call(
        &host,
        &upstream,
        "bystander",
        json!({"act": "read_root", "path": "secret.txt"}),
    )
    .await;
    assert!(ok && own == "the bystander's secret", "{own}");
    let victim = worker_pid(&host, &upstream, "victim").await;
    assert_forked(&program, bystander);
    assert_forked(&program, victim);
    assert_ne!(bystander, victim);
    the_zygote(&program);

    let (ok, mine) = call(
        &host,
        &upstream,
        "victim",
        json!({"act": "read_root", "path": "mine.txt"}),
    )
    .await;
    assert!(ok && mine == "my own file", "{mine}");
    let (ok, stolen) = call(
        &host,
        &upstream,
        "victim",
        json!({"act": "read", "path": secret.display().to_string()}),
    )
    .await;
    assert!(
        !ok && stolen.contains("failed: Permission denied"),
        "the victim's worker read another project: {stolen}"
    );
    assert_eq!(
        worker_pid(&host, &upstream, "victim").await,
        victim,
        "the same worker was asked"
    );
}

#[tokio::test]
async fn a_librarys_constructor_runs_only_in_the_confined_child() {
    let links = tempfile::tempdir().unwrap();
    let program = program(links.path(), "rojos-zygote-ctor");
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let host = host(&upstream, &program).await;

    let (ok, seen) = call(&host, &upstream, "victim", json!({"act": "ctor"})).await;
    assert!(ok, "{seen}");
    let seen: Value = serde_json::from_str(&seen).unwrap();
    let pid = u32::try_from(seen["pid"].as_u64().unwrap()).unwrap();
    assert_forked(&program, pid);
    assert_ne!(the_zygote(&program), pid);
    assert_eq!(
        seen["ctor_pid"], seen["pid"],
        "the constructor ran in the worker itself, not in the zygote: {seen}"
    );
    assert_eq!(
        seen["ctor_opened_etc_passwd"], false,
        "the constructor ran already confined: {seen}"
    );
}
