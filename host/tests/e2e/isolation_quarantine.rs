//! Quarantine on a running host: a drop-in whose worker keeps crashing is, after
//! `quarantine_after` deaths, no longer offered to the model, its calls are refused with a
//! result saying why, `GET /tools` and `/metrics` show it; replacing its file with a different
//! build lifts it and a fresh worker serves the next call. Repeated crashes are not restarted
//! in a tight loop: the worker is started again after a growing back-off.
//!
//! The test binary's loader is shared by every test and keeps each file content's library (and
//! its workers' crash count and quarantine rule): each test here has a loader of its own.

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

/// `hostile_tool`'s entry in `GET /tools`, if listed.
async fn hostile_entry(host: &TestHost) -> Option<Value> {
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    tools
        .into_iter()
        .find(|t| t["function"]["name"] == "hostile_tool")
}

/// Writes `lib` with `padding` zero bytes appended to `to`: another file content, the same
/// code.
fn padded(lib: &Path, padding: usize, to: &Path) {
    let mut bytes = std::fs::read(lib).unwrap();
    bytes.extend(std::iter::repeat_n(0u8, padding));
    std::fs::write(to, bytes).unwrap();
}

/// Copies `lib` padded with `padding` bytes into the drop-in folder as `name` (under a
/// dot-name, then renamed, as users are told to).
fn deploy(host: &TestHost, lib: &Path, name: &str, padding: usize) {
    let tmp = host.dropin_dir().join(format!(".{name}.tmp"));
    padded(lib, padding, &tmp);
    std::fs::rename(&tmp, host.dropin_dir().join(name)).unwrap();
}

/// One chat in project `victim` whose model calls `hostile_tool` with `args`: the result.
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
    assert_eq!(stream.text(), "done", "the run went on to its answer");
    let (name, ok, result) = stream.results()[0].clone();
    assert_eq!(name, "hostile_tool");
    (ok, result)
}

/// Whether the `i`-th model request offered `hostile_tool`.
fn offered_hostile(upstream: &ScriptedUpstream, i: usize) -> bool {
    // No `tools` at all when nothing is offered.
    upstream.received()[i].body["tools"]
        .as_array()
        .is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t["function"]["name"] == "hostile_tool")
        })
}

async fn metrics(host: &TestHost) -> String {
    host.get("/metrics").await.text().await.unwrap()
}

const QUARANTINED_METRIC: &str = "rojos_plugins_quarantined{tool=\"hostile_tool\"} 1";

#[tokio::test]
async fn a_plugin_whose_worker_keeps_crashing_is_quarantined_until_its_file_is_replaced() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let mut config = HostConfig::builtins().upstream(&upstream);
    config.load.clear();
    config.own_loader = true;
    config.dropin = true;
    config.plugins.push_str("quarantine_after = 3\n");
    let host = TestHost::start(config).await;
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    let hostile = plugin_lib("rojos_test_hostile_tool");
    deploy(&host, &hostile, "libhostile.so", 1);
    eventually("hostile_tool is offered", || async {
        hostile_entry(&host).await.is_some()
    })
    .await;

    for crash in 1..=3 {
        let (ok, result) = call(&host, &upstream, json!({"act": "segv"})).await;
        assert!(!ok);
        assert!(
            result.starts_with(
                "error: the tool plugin 'hostile_tool' crashed (SIGSEGV) while running this call; "
            ),
            "crash {crash}: {result}"
        );
        if crash < 3 {
            assert!(
                result.ends_with("it is started again for the next call"),
                "{result}"
            );
        } else {
            assert!(
                result.ends_with("it is now quarantined (its worker died 3 times within 600 s (the last one crashed (SIGSEGV))) until its file is replaced"),
                "{result}"
            );
        }
    }

    let entry = hostile_entry(&host).await.expect("listed with its reason");
    assert_eq!(
        entry["quarantined"],
        "its worker died 3 times within 600 s (the last one crashed (SIGSEGV))"
    );
    let tools: Vec<Value> = host.get("/tools").await.json().await.unwrap();
    assert!(
        tools
            .iter()
            .filter(|t| t["function"]["name"] != "hostile_tool")
            .all(|t| t.get("quarantined").is_none()),
        "only hostile_tool is quarantined: {tools:?}"
    );
    assert!(metrics(&host).await.contains(QUARANTINED_METRIC));

    // Not offered; a call by name (from an older turn) is refused, not run.
    let before = upstream.received().len();
    let (ok, result) = call(&host, &upstream, json!({"act": "pid"})).await;
    assert!(!ok);
    assert_eq!(
        result,
        "error: the tool plugin 'hostile_tool' is quarantined and was not run: its worker died 3 times within 600 s (the last one crashed (SIGSEGV)); it stays so until its file is replaced"
    );
    assert!(
        !offered_hostile(&upstream, before),
        "a quarantined tool is not offered to the model"
    );

    // A new build (another content) lifts it: offered again, a fresh worker serves.
    deploy(&host, &hostile, "libhostile.so", 2);
    eventually("the new file is loaded and not quarantined", || async {
        hostile_entry(&host)
            .await
            .is_some_and(|e| e.get("quarantined").is_none())
    })
    .await;
    assert!(!metrics(&host).await.contains(QUARANTINED_METRIC));
    let before = upstream.received().len();
    let (ok, pid) = call(&host, &upstream, json!({"act": "pid"})).await;
    assert!(ok, "{pid}");
    assert!(pid.parse::<u32>().is_ok(), "a worker's pid: {pid}");
    assert!(offered_hostile(&upstream, before), "offered again");
}

#[tokio::test]
async fn repeated_crashes_back_off_and_a_call_that_cannot_wait_it_out_is_refused_at_once() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let libs = tempfile::tempdir().unwrap();
    let lib = libs.path().join("libhostile_backoff.so");
    padded(&plugin_lib("rojos_test_hostile_tool"), 3, &lib);
    let mut config = HostConfig::builtins().upstream(&upstream);
    config.load = vec![lib];
    config.own_loader = true;
    config.call_timeout_secs = 1.0;
    config
        .plugins
        .push_str("isolation = \"worker\"\nquarantine_after = 0\n");
    let host = TestHost::start(config).await;
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    // The back-off doubles from 50 ms with each crash: the first ones are waited out within
    // the call's second, a later one is not and the call is refused without a start.
    let mut crashes = 0;
    let refusal = loop {
        let (ok, result) = call(&host, &upstream, json!({"act": "abort"})).await;
        assert!(!ok);
        if result.contains("crashed (SIGABRT") {
            assert!(
                result.ends_with("it is started again for the next call"),
                "{result}"
            );
            crashes += 1;
            assert!(crashes < 8, "never backed off: {result}");
            continue;
        }
        break result;
    };
    assert!(
        crashes >= 3,
        "the first back-offs are waited out: {refusal}"
    );
    let prefix = format!(
        "error: the tool plugin 'hostile_tool' was not run: its worker died {crashes} times in the last minute and is started again in "
    );
    assert!(
        refusal.starts_with(&prefix) && refusal.ends_with(" s; try again then"),
        "{refusal}"
    );
    // Never quarantined with quarantine_after = 0.
    assert!(hostile_entry(&host)
        .await
        .unwrap()
        .get("quarantined")
        .is_none());
}

/// The line `rojos check` (a process of its own) prints under `hostile_tool`, if any.
fn checked_quarantine(host: &TestHost) -> Option<String> {
    use crate::support::binary::{rojos, run};
    let config = host.config_dir().join("rojos.toml");
    let ran = run(rojos(&["--config", config.to_str().unwrap(), "check"]));
    assert_eq!(ran.code, Some(0), "{ran}");
    ran.stdout
        .lines()
        .find(|l| l.contains("quarantined:"))
        .map(str::to_owned)
}

#[tokio::test]
async fn a_quarantine_outlives_a_restart_and_rojos_check_shows_it_until_the_file_is_replaced() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let plugins = tempfile::tempdir().unwrap();
    let file = plugins.path().join("libhostile.so");
    let hostile = plugin_lib("rojos_test_hostile_tool");
    padded(&hostile, 1, &file);
    // A new loader each start: nothing but the storage carries the quarantine over.
    let config = || {
        let mut config = HostConfig::builtins().upstream(&upstream);
        config.load = vec![file.clone()];
        config.own_loader = true;
        config
            .plugins
            .push_str("isolation = \"worker\"\nquarantine_after = 3\n");
        config
    };
    let host = TestHost::start(config()).await;
    std::fs::create_dir_all(host.project_root("victim")).unwrap();
    assert_eq!(checked_quarantine(&host), None);
    for _ in 0..3 {
        let (ok, _) = call(&host, &upstream, json!({"act": "segv"})).await;
        assert!(!ok);
    }
    let reason = "its worker died 3 times within 600 s (the last one crashed (SIGSEGV))";
    let entry = hostile_entry(&host).await.expect("listed with its reason");
    assert_eq!(entry["quarantined"], reason);

    // A restart keeps it: listed with its reason, not offered, its calls refused.
    let host = host.restart(config()).await;
    let entry = hostile_entry(&host)
        .await
        .expect("listed after the restart");
    assert_eq!(entry["quarantined"], reason);
    assert!(metrics(&host).await.contains(QUARANTINED_METRIC));
    let before = upstream.received().len();
    let (ok, result) = call(&host, &upstream, json!({"act": "pid"})).await;
    assert!(!ok);
    assert!(
        result.contains("is quarantined and was not run"),
        "{result}"
    );
    assert!(!offered_hostile(&upstream, before));
    // `rojos check`, another process, shows it and how to lift it.
    let line = checked_quarantine(&host).expect("rojos check lists the quarantine");
    assert!(
        line.contains(reason) && line.contains("replacing the file with a different build"),
        "{line}"
    );

    // A different build at the same path lifts it, across a restart too.
    padded(&hostile, 2, &file);
    let host = host.restart(config()).await;
    let entry = hostile_entry(&host).await.expect("listed");
    assert!(entry.get("quarantined").is_none(), "{entry}");
    let (ok, pid) = call(&host, &upstream, json!({"act": "pid"})).await;
    assert!(ok, "{pid}");
    assert_eq!(checked_quarantine(&host), None);
}
