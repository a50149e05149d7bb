//! MCP servers as tool sources (`docs/mcp.md`), on the real binary: a stdio server of the
//! tests' own (`mcp/tool_server.py`, the official Python SDK's MCPServer) is started by rojos
//! from `[mcp.servers.pytools]`; its tools are listed as `pytools__TOOL`, offered only to the
//! rojos that enable them, and called by the scripted model through the chat's dispatch:
//! results in `TOOL_RESULT` and the stored history, bad arguments refused before the server
//! sees them, a raised error, a crash (restarted on the next call), a hang (the time-out).
//! Live lists: `list_changed` adds and removes tools, a restart and a late start publish the
//! list the server gives then.
//!
//! Without python3 or the `mcp` package these tests fail with the command that installs it.

use std::{path::Path, process::Command};

use serde_json::{json, Value};

use crate::support::{
    binary::{self, RunningBinary},
    host::{client, stored_messages_at, HostConfig, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// The server script, committed beside this file.
pub(crate) const SERVER_SCRIPT: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp/tool_server.py");

/// What `.ci/run` runs to install the SDK.
const INSTALL: &str = "python3 -m pip install 'mcp>=2.3,<3'";

/// Every tool of the script, as rojos names them.
const PYTOOLS: [&str; 9] = [
    "pytools__add",
    "pytools__add_tool",
    "pytools__crash",
    "pytools__echo",
    "pytools__fail",
    "pytools__hang",
    "pytools__pid",
    "pytools__remove_tool",
    "pytools__spawn_helper",
];

/// Fails (never skips) when python3 or the SDK is missing.
pub(crate) fn require_python_sdk() {
    let found = Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output();
    match found {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "the MCP Python SDK is missing; install it with: {INSTALL}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(e) => panic!("python3 cannot be run ({e}); install python3, then: {INSTALL}"),
    }
}

/// The config: the script as `pytools`, and rojos enabling none, one or all of its tools.
fn config(upstream_url: Option<&ScriptedUpstream>) -> HostConfig {
    let mut config = HostConfig::builtins().with(&format!(
        r#"
[mcp.servers.pytools]
command = "python3"
args = [{SERVER_SCRIPT:?}]

[rojos.plain]
provider = "scripted"
tools = ["read_path_meta"]

[rojos.echoer]
provider = "scripted"
tools = ["pytools__echo"]

[rojos.allpy]
provider = "scripted"
tools = ["pytools__*", "read_path_meta"]
"#
    ));
    if let Some(upstream) = upstream_url {
        config = config.upstream(upstream);
    }
    config
}

/// The real binary serving `config` from a folder of its own, project `demo` created.
struct Served {
    binary: RunningBinary,
    url: String,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(config: &HostConfig) -> Served {
        require_python_sdk();
        let dir = config.in_temp_folder();
        std::fs::create_dir_all(dir.path().join("storage/demo/root")).unwrap();
        let binary = RunningBinary::start(dir.path(), "info", &[]);
        let url = binary.url();
        Served {
            binary,
            url,
            _dir: dir,
        }
    }

    async fn tool_names(&self, rojo: &str) -> Vec<String> {
        offered_tool_names(&self.url, rojo).await
    }

    async fn tools(&self, rojo: &str) -> Vec<Value> {
        offered_tools(&self.url, rojo).await
    }

    async fn chat(&self, rojo: &str, message: &str) -> Stream {
        self.chat_in("demo", rojo, message).await
    }

    async fn chat_in(&self, project: &str, rojo: &str, message: &str) -> Stream {
        let response = client()
            .post(format!("{}/chat", self.url))
            .bearer_auth(TOKEN)
            .json(&json!({"projectId": project, "rojo": rojo, "message": message}))
            .send()
            .await
            .expect("the chat reaches rojos");
        Stream::read(response).await
    }

    /// `project`'s root folder (absolute, created).
    fn root(&self, project: &str) -> std::path::PathBuf {
        let root = self._dir.path().join("storage").join(project).join("root");
        std::fs::create_dir_all(&root).unwrap();
        root.canonicalize().unwrap()
    }

    fn log(&self) -> String {
        self.binary.stderr.lock().unwrap().clone()
    }

    async fn metrics(&self) -> String {
        let response = client()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        response.text().await.unwrap()
    }

    /// The pids of rojos's children that are zombies (exited, never reaped).
    fn zombie_children(&self) -> Vec<String> {
        let parent = self.binary.id().to_string();
        let mut zombies = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces, so split after the last ')'.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.first() == Some(&"Z") && fields.get(1) == Some(&parent.as_str()) {
                zombies.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        zombies
    }
}

/// What `GET /tools?rojo=` offers on the host at `url`.
pub(crate) async fn offered_tools(url: &str, rojo: &str) -> Vec<Value> {
    let response = client()
        .get(format!("{url}/tools?rojo={rojo}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The names of [`offered_tools`].
pub(crate) async fn offered_tool_names(url: &str, rojo: &str) -> Vec<String> {
    offered_tools(url, rojo)
        .await
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The names of the tools the model was offered in upstream request `n`.
fn offered(upstream: &ScriptedUpstream, n: usize) -> Vec<String> {
    upstream.received()[n].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_are_listed_offered_only_where_enabled_and_called_in_a_chat() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "pytools__echo", json!({"text": "hi"}))]),
        Turn::text("done"),
        Turn::text("plain answer"),
    ])
    .await;
    let served = Served::start(&config(Some(&upstream)));

    let all = served.tool_names("allpy").await;
    for name in PYTOOLS {
        assert!(all.contains(&name.to_owned()), "{name} missing in {all:?}");
    }
    assert!(all.contains(&"read_path_meta".to_owned()));
    assert_eq!(served.tool_names("echoer").await, ["pytools__echo"]);
    let plain = served.tool_names("plain").await;
    assert_eq!(plain, ["read_path_meta"]);
    let echo = served.tools("echoer").await.remove(0);
    assert_eq!(echo["function"]["description"], "Echoes the text back.");
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(echo["function"]["parameters"]["required"], json!(["text"]));

    let stream = served.chat("echoer", "echo hi").await;
    assert_eq!(
        stream.results(),
        [("pytools__echo".to_owned(), true, "echo: hi".to_owned())]
    );
    assert_eq!(offered(&upstream, 0), ["pytools__echo"]);
    let (conversation, _) = stream.done();
    let stored = stored_messages_at(&served.url, &conversation).await;
    let tool_message = stored
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a stored tool message");
    assert_eq!(tool_message["content"], "echo: hi");

    let plain_chat = served.chat("plain", "hello").await;
    assert_eq!(plain_chat.text(), "plain answer");
    assert_eq!(offered(&upstream, 2), ["read_path_meta"]);

    let log = served.log();
    assert!(
        log.contains("mcp_server=pytools") && log.contains("called echo hi"),
        "the server's stderr is not in the log under its name:\n{log}"
    );
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_failures_are_error_results_and_a_crashed_server_is_restarted() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[
            ("c1", "pytools__pid", json!({})),
            ("c2", "pytools__add", json!({"a": "x", "b": 1})),
            ("c3", "pytools__fail", json!({"reason": "boom"})),
        ]),
        Turn::tool_calls(&[
            ("c3b", "pytools__spawn_helper", json!({})),
            ("c4", "pytools__crash", json!({})),
            ("c5", "read_path_meta", json!({"path": "."})),
        ]),
        Turn::tool_calls(&[("c6", "pytools__pid", json!({"tag": "after"}))]),
        Turn::tool_calls(&[("c7", "pytools__hang", json!({}))]),
        Turn::tool_calls(&[("c8", "pytools__echo", json!({"text": "still here"}))]),
        Turn::text("done"),
    ])
    .await;
    let served = Served::start(&config(Some(&upstream)));
    let stream = served.chat("allpy", "try everything").await;
    let mut results = stream.results();
    assert_eq!(results.len(), 9, "{results:#?}");
    let (name, ok, helper) = results.remove(3);
    assert!(name == "pytools__spawn_helper" && ok, "{helper}");

    let (name, ok, first_pid) = &results[0];
    assert!(name == "pytools__pid" && *ok, "{results:#?}");

    let (_, ok, text) = &results[1];
    assert!(!ok);
    assert!(
        text.starts_with(
            "error: invalid arguments for pytools__add: /a: \"x\" is not of type \"integer\""
        ),
        "{text}"
    );
    assert!(
        !served.log().contains("called add"),
        "the server saw arguments the schema refuses"
    );

    let (_, ok, text) = &results[2];
    assert!(!ok);
    assert!(
        text.starts_with("error: ") && text.contains("boom"),
        "{text}"
    );

    let (_, ok, text) = &results[3];
    assert!(!ok);
    assert!(
        text.contains("MCP server pytools stopped during the call")
            && text.contains("restarted on the next call"),
        "{text}"
    );
    let (name, ok, _) = &results[4];
    assert!(name == "read_path_meta" && *ok, "{results:#?}");

    let (_, ok, second_pid) = &results[5];
    assert!(*ok, "{results:#?}");
    assert_ne!(first_pid, second_pid, "the server was not restarted");

    let (_, ok, text) = &results[6];
    assert!(!ok);
    assert_eq!(
        text,
        "error: MCP server pytools did not answer hang within 2.0 s"
    );

    let (_, ok, text) = &results[7];
    assert!(*ok && text == "echo: still here", "{results:#?}");
    upstream.assert_consumed();

    let metrics = served.metrics().await;
    for line in [
        r#"rojos_tool_calls_total{tool="pytools__pid",outcome="ok"} 2"#,
        r#"rojos_tool_calls_total{tool="pytools__crash",outcome="error"} 1"#,
        r#"rojos_tool_calls_total{tool="pytools__hang",outcome="error"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    // The helper the crashed server started went with it (the server's process group is
    // killed when its session ends), and the crashed process was reaped (its session is
    // retired in the background).
    let helper_gone = || {
        !Path::new(&format!("/proc/{helper}")).exists()
            || std::fs::read_to_string(format!("/proc/{helper}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !helper_gone() {
        assert!(
            std::time::Instant::now() < deadline,
            "the crashed server's helper process {helper} still runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !served.zombie_children().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "zombie children of rojos: {:?}",
            served.zombie_children()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[test]
fn mcp_check_and_tools_show_each_servers_tools_or_why_it_did_not_start() {
    require_python_sdk();
    let config = config(None).with(
        r#"
[mcp.servers.broken]
command = "no-such-command-for-rojos-tests"

[rojos.brokenuser]
provider = "scripted"
tools = ["broken__anything"]
"#,
    );
    let dir = config.in_temp_folder();
    let path = dir.path().join("rojos.toml");
    let ran = binary::run(binary::rojos(&[
        "check",
        "--config",
        &path.to_string_lossy(),
    ]));
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("MCP server pytools: 9 tools"), "{ran}");
    assert!(
        ran.stdout.contains(
            "MCP server broken: not started: cannot run \"no-such-command-for-rojos-tests\""
        ),
        "{ran}"
    );
    assert!(ran.stdout.contains("pytools__echo"), "{ran}");

    let ran = binary::run(binary::rojos(&[
        "tools",
        "--rojo",
        "echoer",
        "--config",
        &path.to_string_lossy(),
    ]));
    assert_eq!(ran.code, Some(0), "{ran}");
    let tools: Value = serde_json::from_str(&ran.stdout).expect("a JSON array");
    assert_eq!(tools[0]["function"]["name"], "pytools__echo", "{ran}");
    assert_eq!(tools.as_array().map(Vec::len), Some(1), "{ran}");
}

/// The reference filesystem server, installed by `.ci/run` into the tests' npm folder.
const FILESYSTEM_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/e2e/mcp/npm/node_modules/.bin/mcp-server-filesystem"
);

/// What `.ci/run` runs to install it.
const NPM_INSTALL: &str = "(cd host/tests/e2e/mcp/npm && npm ci --no-audit --no-fund)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_the_reference_filesystem_server_is_listed_and_called_in_a_chat() {
    assert!(
        Path::new(FILESYSTEM_SERVER).is_file(),
        "the reference MCP filesystem server is missing; install it with: {NPM_INSTALL}"
    );
    let folder = tempfile::tempdir().unwrap();
    let shared = folder.path().canonicalize().unwrap();
    std::fs::write(shared.join("hello.txt"), "hello from the shared folder\n").unwrap();
    let file = shared.join("hello.txt").display().to_string();
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "docs__read_text_file", json!({"path": file}))]),
        Turn::text("done"),
    ])
    .await;
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        r#"
[mcp.servers.docs]
command = {FILESYSTEM_SERVER:?}
args = [{shared:?}]
start_timeout_secs = 60

[rojos.docs]
provider = "scripted"
tools = ["docs__*"]
"#,
        shared = shared.display().to_string(),
    ));
    let served = Served::start(&config);
    let names = served.tool_names("docs").await;
    assert!(
        names.contains(&"docs__read_text_file".to_owned())
            && names.contains(&"docs__list_directory".to_owned())
            && names.iter().all(|n| n.starts_with("docs__")),
        "{names:?}"
    );

    let stream = served.chat("docs", "read hello.txt").await;
    let results = stream.results();
    assert_eq!(results.len(), 1, "{results:#?}");
    let (name, ok, text) = &results[0];
    assert!(name == "docs__read_text_file" && *ok, "{results:#?}");
    assert!(text.contains("hello from the shared folder"), "{text}");
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_per_project_filesystem_server_sees_only_its_projects_root() {
    assert!(
        Path::new(FILESYSTEM_SERVER).is_file(),
        "the reference MCP filesystem server is missing; install it with: {NPM_INSTALL}"
    );
    let config = HostConfig::builtins().with(&format!(
        r#"
[mcp.servers.docs]
command = {FILESYSTEM_SERVER:?}
args = ["{{project_root}}"]
start_timeout_secs = 60

[rojos.docs]
provider = "scripted"
tools = ["docs__*"]
"#
    ));
    // The roots are known only once the host's folder is: the upstream is scripted after.
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let served = Served::start(&config.upstream(&upstream));
    let names = served.tool_names("docs").await;
    assert!(
        names.contains(&"docs__read_text_file".to_owned())
            && names.iter().all(|n| n.starts_with("docs__")),
        "{names:?}"
    );
    let (root_a, root_b) = (served.root("alpha"), served.root("beta"));
    std::fs::write(root_a.join("a.txt"), "text of alpha\n").unwrap();
    std::fs::write(root_b.join("b.txt"), "text of beta\n").unwrap();
    let path = |root: &Path, file: &str| root.join(file).display().to_string();
    upstream.push(vec![
        Turn::tool_calls(&[(
            "c1",
            "docs__read_text_file",
            json!({"path": path(&root_a, "a.txt")}),
        )]),
        Turn::text("done"),
        Turn::tool_calls(&[
            (
                "c2",
                "docs__read_text_file",
                json!({"path": path(&root_b, "b.txt")}),
            ),
            (
                "c3",
                "docs__read_text_file",
                json!({"path": path(&root_a, "a.txt")}),
            ),
        ]),
        Turn::text("done"),
    ]);

    let results = served.chat_in("alpha", "docs", "read a").await.results();
    assert_eq!(results.len(), 1, "{results:#?}");
    let (name, ok, text) = &results[0];
    assert!(name == "docs__read_text_file" && *ok, "{results:#?}");
    assert!(text.contains("text of alpha"), "{text}");

    let results = served
        .chat_in("beta", "docs", "read b, then a")
        .await
        .results();
    assert_eq!(results.len(), 2, "{results:#?}");
    let (_, ok, text) = &results[0];
    assert!(*ok && text.contains("text of beta"), "{results:#?}");
    let (_, ok, text) = &results[1];
    assert!(
        !ok && text.starts_with("error: ") && !text.contains("text of alpha"),
        "project beta's server read alpha's file: {results:#?}"
    );
    assert!(text.to_lowercase().contains("access denied"), "{text}");
    upstream.assert_consumed();
}

/// The config of the script as a per-project server, with `extra` keys in its table.
fn per_project_config(upstream: &ScriptedUpstream, extra: &str) -> HostConfig {
    let mut config = HostConfig::builtins().upstream(upstream);
    // Room for a Python server's calls on a busy machine (its start has its own bound,
    // `start_timeout_secs`).
    config.call_timeout_secs = 20.0;
    config.with(&format!(
        r#"
[mcp.servers.pytools]
command = "python3"
args = [{SERVER_SCRIPT:?}, "{{project_root}}"]
{extra}

[rojos.pids]
provider = "scripted"
tools = ["pytools__pid"]
"#
    ))
}

/// The server pid a one-call chat of `project` returned.
async fn pid_in(served: &Served, project: &str) -> String {
    let results = served.chat_in(project, "pids", "pid").await.results();
    assert_eq!(results.len(), 1, "{results:#?}");
    let (_, ok, pid) = results.into_iter().next().unwrap();
    assert!(ok, "{pid}");
    pid
}

/// Two turns: the model calls `pytools__pid`, then answers.
fn pid_turns() -> Vec<Turn> {
    vec![
        Turn::tool_calls(&[("p", "pytools__pid", json!({}))]),
        Turn::text("done"),
    ]
}

fn process_gone(pid: &str) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// Waits (up to `secs`) for `pid` to end; fails with `why` if it does not.
async fn wait_gone(pid: &str, secs: u64, why: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !process_gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "{why}: {pid} still runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_per_project_server_runs_one_process_per_project() {
    let turns = [pid_turns(), pid_turns(), pid_turns()].concat();
    let upstream = ScriptedUpstream::start(turns).await;
    let served = Served::start(&per_project_config(&upstream, ""));
    assert_eq!(served.tool_names("pids").await, ["pytools__pid"]);
    let alpha = pid_in(&served, "alpha").await;
    let beta = pid_in(&served, "beta").await;
    assert_ne!(alpha, beta, "two projects share one process");
    assert_eq!(
        pid_in(&served, "alpha").await,
        alpha,
        "alpha's process was not reused"
    );
    assert!(!process_gone(&alpha) && !process_gone(&beta));
    let log = served.log();
    assert!(log.contains("pytools (project beta)"), "{log}");
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_slow_start_does_not_count_against_the_calls_time_out() {
    // Each start (the listing one, then alpha's) takes 3 s; the call itself has 1 s.
    let upstream = ScriptedUpstream::start(pid_turns()).await;
    let mut config = per_project_config(
        &upstream,
        "env = { PYTOOLS_START_DELAY_SECS = \"3\" }\nstart_timeout_secs = 60",
    );
    config.call_timeout_secs = 1.0;
    let served = Served::start(&config);
    let pid = pid_in(&served, "alpha").await;
    assert!(!process_gone(&pid), "alpha's instance was not kept");
    assert!(served.log().contains("starting slowly"), "{}", served.log());
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_at_max_running_a_new_project_stops_the_least_recently_used_instance() {
    let upstream = ScriptedUpstream::start([pid_turns(), pid_turns()].concat()).await;
    let served = Served::start(&per_project_config(&upstream, "max_running = 1"));
    let alpha = pid_in(&served, "alpha").await;
    let beta = pid_in(&served, "beta").await;
    assert_ne!(alpha, beta);
    wait_gone(&alpha, 15, "alpha's instance outlived the cap of one").await;
    assert!(!process_gone(&beta));
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_an_idle_per_project_instance_is_stopped() {
    let upstream = ScriptedUpstream::start(pid_turns()).await;
    let served = Served::start(&per_project_config(&upstream, "idle_shutdown_secs = 1"));
    let alpha = pid_in(&served, "alpha").await;
    wait_gone(&alpha, 20, "alpha's idle instance was not stopped").await;
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_at_max_running_with_every_instance_busy_a_new_project_gets_an_error_result() {
    // alpha's chat takes the first turn (its call hangs), beta's the next two; the last turn
    // would be alpha's answer, which the test does not wait for.
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("h", "pytools__hang", json!({}))]),
        Turn::tool_calls(&[("p", "pytools__pid", json!({}))]),
        Turn::text("done"),
        Turn::text("never"),
    ])
    .await;
    let mut config = per_project_config(&upstream, "max_running = 1").with(
        "[rojos.hangs]\nprovider = \"scripted\"\ntools = [\"pytools__hang\", \"pytools__pid\"]\n",
    );
    // alpha's call stays busy for the whole test.
    config.call_timeout_secs = 300.0;
    let served = Served::start(&config);
    let hanging = served.chat_in("alpha", "hangs", "hang");
    let refused = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !served.log().contains("called hang") {
            assert!(
                std::time::Instant::now() < deadline,
                "alpha's call never started:\n{}",
                served.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        served.chat_in("beta", "hangs", "pid").await.results()
    };
    let results = tokio::select! {
        _ = hanging => panic!("alpha's hanging call ended:\n{}", served.log()),
        results = refused => results,
    };
    assert_eq!(
        results,
        [(
            "pytools__pid".to_owned(),
            false,
            "error: MCP server pytools runs one process per project and already runs its \
             limit of 1 (max_running), all busy with calls of other projects; try again in a \
             moment, or ask the operator to raise mcp.servers.pytools.max_running"
                .to_owned()
        )]
    );
}

// Live tool lists (`docs/mcp.md`, "Live tool lists").

/// How long a live change may take to show on a busy machine.
const LIVE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

impl Served {
    /// Polls `GET /tools?rojo=` until `ready` holds of the names, failing after
    /// [`LIVE_DEADLINE`] with `what` and the last names seen.
    async fn wait_for_tools(&self, rojo: &str, what: &str, ready: impl Fn(&[String]) -> bool) {
        let deadline = std::time::Instant::now() + LIVE_DEADLINE;
        loop {
            let names = self.tool_names(rojo).await;
            if ready(&names) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within {LIVE_DEADLINE:?}; the tools are {names:?}\n{}",
                self.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

/// A config of `pytools` whose start is shaped by `env` (see `mcp/tool_server.py`), a rojo
/// `allpy` with all its tools.
fn live_config(upstream: Option<&ScriptedUpstream>, env: &str) -> HostConfig {
    let mut config = HostConfig::builtins().with(&format!(
        r#"
[mcp.servers.pytools]
command = "python3"
args = [{SERVER_SCRIPT:?}]
env = {{ {env} }}

[rojos.allpy]
provider = "scripted"
tools = ["pytools__*"]
"#
    ));
    // Room for a Python server's calls on a busy machine.
    config.call_timeout_secs = 20.0;
    if let Some(upstream) = upstream {
        config = config.upstream(upstream);
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_changed_adds_and_removes_tools_live() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "pytools__add_tool", json!({"name": "fresh"}))]),
        Turn::text("added"),
        Turn::tool_calls(&[("c2", "pytools__fresh", json!({"text": "hi"}))]),
        Turn::text("called"),
        Turn::tool_calls(&[("c3", "pytools__remove_tool", json!({"name": "fresh"}))]),
        Turn::text("removed"),
    ])
    .await;
    let served = Served::start(&config(Some(&upstream)));
    assert!(!has(&served.tool_names("allpy").await, "pytools__fresh"));

    let added = served.chat("allpy", "add a tool").await;
    assert_eq!(
        added.results(),
        [(
            "pytools__add_tool".to_owned(),
            true,
            "added fresh".to_owned()
        )]
    );
    served
        .wait_for_tools("allpy", "pytools__fresh after list_changed", |names| {
            has(names, "pytools__fresh")
        })
        .await;
    let fresh = served
        .tools("allpy")
        .await
        .into_iter()
        .find(|t| t["function"]["name"] == "pytools__fresh")
        .unwrap();
    assert_eq!(fresh["function"]["description"], "The added tool fresh.");

    let called = served.chat("allpy", "call it").await;
    assert!(offered(&upstream, 2).contains(&"pytools__fresh".to_owned()));
    assert_eq!(
        called.results(),
        [("pytools__fresh".to_owned(), true, "fresh: hi".to_owned())]
    );

    let removed = served.chat("allpy", "remove it").await;
    assert!(removed.results()[0].1, "{:?}", removed.results());
    served
        .wait_for_tools("allpy", "pytools__fresh gone after list_changed", |names| {
            !has(names, "pytools__fresh") && has(names, "pytools__echo")
        })
        .await;
    let log = served.log();
    assert!(
        log.contains("MCP server pytools: tools changed: +pytools__fresh")
            && log.contains("MCP server pytools: tools changed: \u{2212}pytools__fresh"),
        "each change is logged:\n{log}"
    );
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_restarted_server_offers_the_tools_it_lists_now() {
    let state = tempfile::tempdir().unwrap();
    let extras = state.path().join("extra-tools");
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "pytools__crash", json!({}))]),
        Turn::tool_calls(&[("c2", "pytools__pid", json!({"tag": "restart"}))]),
        Turn::text("done"),
    ])
    .await;
    let env = format!(
        "PYTOOLS_EXTRA_TOOLS_FILE = {:?}",
        extras.display().to_string()
    );
    let served = Served::start(&live_config(Some(&upstream), &env));
    assert!(!has(&served.tool_names("allpy").await, "pytools__later"));
    std::fs::write(&extras, "later\n").unwrap();

    let stream = served.chat("allpy", "crash, then call again").await;
    let results = stream.results();
    assert!(!results[0].1 && results[1].1, "{results:#?}");
    served
        .wait_for_tools("allpy", "the restarted server's new tool", |names| {
            has(names, "pytools__later")
        })
        .await;
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_server_that_could_not_start_is_retried_and_its_tools_appear() {
    let state = tempfile::tempdir().unwrap();
    let marker = state.path().join("may-start");
    let env = format!("PYTOOLS_START_ONLY_IF = {:?}", marker.display().to_string());
    let served = Served::start(&live_config(None, &env));
    assert!(served.tool_names("allpy").await.is_empty());
    binary::RunningBinary::wait_for(
        &served.binary.stderr,
        "does not exist",
        "the server's first refusal to start",
    );
    std::fs::write(&marker, "").unwrap();
    served
        .wait_for_tools("allpy", "the late server's tools", |names| {
            has(names, "pytools__echo")
        })
        .await;
}
