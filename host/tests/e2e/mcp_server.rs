//! `/mcp/{projectId}?rojo=NAME` on the real binary, driven by the official MCP Python SDK
//! (`mcp/session.py`, run with python3): the protocol version negotiated, `tools/list` equal
//! to the rojo's `GET /tools`, `tools/call` through the chat's confined path (fs-guard's
//! refusal, a disabled tool, bad arguments, the time-out and the result cap as `isError` or
//! cut results, the same metrics), and the API's tokens and project scopes in front. Then the
//! same handler over stdio, as `rojos mcp --project ID --rojo NAME`. Last, live lists
//! (`mcp/watch.py`): `notifications/tools/list_changed` reaches the sessions (and, under
//! `2026-07-28`, the `subscriptions/listen` streams) whose rojo's tools changed, and no other.
//!
//! Without python3 or the `mcp` package these tests fail with the command that installs it.

use std::{path::Path, time::Duration};

use serde_json::{json, Value};

use crate::support::{
    binary::{self, RunningBinary},
    host::{client, get_json_at, HostConfig, DEMO_TOKEN, TOKEN},
    plugin_lib,
};

/// The session script, committed beside this file.
const SESSION_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp/session.py");

/// What `.ci/run` runs to install the SDK.
const INSTALL: &str = "python3 -m pip install 'mcp>=2.3,<3'";

/// A rojo that may only read.
const READER_ROJO: &str =
    "[rojos.reader]\nprovider = \"scripted\"\ntools = [\"read_path_meta\", \"get_text_content\"]\n";

/// The newest revision with an `initialize` handshake (what the SDK's `initialize` asks for).
const HANDSHAKE_REVISION: &str = "2025-11-25";

/// The current revision, negotiated by `server/discover` without a session.
const CURRENT_REVISION: &str = "2026-07-28";

/// The real binary serving `config`, from a folder of its own.
struct Served {
    binary: RunningBinary,
    url: String,
    dir: tempfile::TempDir,
}

impl Served {
    fn start(config: &HostConfig) -> Served {
        let dir = config.in_temp_folder();
        let binary = RunningBinary::start(dir.path(), "info", &[]);
        let url = binary.url();
        Served { binary, url, dir }
    }

    /// Writes `text` as `name` in project `project`'s folder.
    fn write(&self, project: &str, name: &str, text: &str) {
        let root = self.dir.path().join("storage").join(project).join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join(name), text).unwrap();
    }

    /// Polls the server's log (up to 30 s) until it has `needle`, without blocking the runtime.
    async fn wait_for_log(&self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.binary.stderr.lock().unwrap().clone();
            if log.contains(needle) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {needle:?} in the log within 30 s:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `GET /metrics` (up to 30 s) until it has the line `line`.
    async fn wait_for_metric(&self, line: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let metrics = client()
                .get(format!("{}/metrics", self.url))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if metrics.lines().any(|l| l == line) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no metric {line} within 30 s:\n{metrics}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `GET path` with the all-projects token, as JSON.
    async fn get_json(&self, path: &str) -> Value {
        get_json_at(&self.url, path).await
    }
}

/// One session of the official SDK at `url` (`legacy`: `initialize`; `modern`:
/// `server/discover`), listing the tools then making `calls` (`[tool, arguments]`). Fails,
/// never skips, when python3 or the SDK is missing.
pub(crate) async fn sdk_session(url: &str, token: &str, mode: &str, calls: Value) -> Value {
    let run = tokio::process::Command::new("python3")
        .arg(SESSION_SCRIPT)
        .args([url, token, mode, &calls.to_string()])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(60), run).await {
        Err(_) => panic!("the MCP session script did not finish within 60 s"),
        Ok(Err(e)) => panic!("python3 cannot be run ({e}): install Python 3, then {INSTALL}"),
        Ok(Ok(output)) => output,
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(
        output.status.code(),
        Some(3),
        "the MCP Python SDK is missing; install it with: {INSTALL}\n{stderr}"
    );
    assert!(output.status.success(), "the MCP session failed:\n{stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        let stdout = String::from_utf8_lossy(&output.stdout);
        panic!("the session script printed no JSON ({e}):\n{stdout}\n{stderr}")
    })
}

/// `(isError, text)` of each call the script made.
pub(crate) fn call_results(session: &Value) -> Vec<(bool, String)> {
    session["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["isError"].as_bool().unwrap(),
                c["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `GET /tools`'s definitions in the shape MCP lists them.
fn as_mcp_tools(definitions: &Value) -> Vec<Value> {
    definitions
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let f = &d["function"];
            json!({"name": f["name"], "description": f["description"], "inputSchema": f["parameters"]})
        })
        .collect()
}

#[tokio::test]
async fn mcp_an_official_client_lists_and_calls_a_reader_rojos_tools() {
    let served = Served::start(&HostConfig::builtins().with(READER_ROJO));
    served.write("demo", "note.txt", "hello from the project\n");
    let calls = json!([
        ["read_path_meta", {"path": "note.txt"}],
        ["get_text_content", {"path": "note.txt"}],
        ["get_text_content", {"path": "../../rojos.toml"}],
        ["list_files", {"path": "."}],
        ["read_path_meta", {}],
        ["no_such_tool", {}],
    ]);
    let url = format!("{}/mcp/demo?rojo=reader", served.url);
    let session = sdk_session(&url, DEMO_TOKEN, "legacy", calls).await;

    assert_eq!(session["protocolVersion"], HANDSHAKE_REVISION);
    assert_eq!(session["server"], "rojos");
    let expected = as_mcp_tools(&served.get_json("/tools?rojo=reader").await);
    let listed = session["tools"].as_array().unwrap();
    assert_eq!(listed, &expected);
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_text_content", "read_path_meta"]);

    let results = call_results(&session);
    let (meta_error, meta) = &results[0];
    assert!(!meta_error, "{meta}");
    let meta: Value = serde_json::from_str(meta).unwrap();
    assert_eq!((&meta["type"], &meta["size"]), (&json!("file"), &json!(23)));
    assert_eq!(results[1], (false, "hello from the project\n".to_owned()));
    assert_eq!(
        results[2],
        (
            true,
            "error: '../../rojos.toml' leads outside the project: paths are relative to the \
             project root"
                .to_owned()
        )
    );
    assert_eq!(
        results[3],
        (
            true,
            "error: tool list_files is not enabled for this assistant; available tools: \
             get_text_content, read_path_meta"
                .to_owned()
        )
    );
    let (args_error, args) = &results[4];
    assert!(args_error, "{args}");
    assert!(
        args.starts_with(
            "error: invalid arguments for read_path_meta: \"path\" is a required property"
        ),
        "{args}"
    );
    let (unknown_error, unknown) = &results[5];
    assert!(unknown_error, "{unknown}");
    assert!(
        unknown.starts_with("error: unknown tool \"no_such_tool\""),
        "{unknown}"
    );

    // Counted as a chat's calls are.
    let metrics = client()
        .get(format!("{}/metrics", served.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        r#"rojos_tool_calls_total{tool="read_path_meta",outcome="ok"} 1"#,
        r#"rojos_tool_calls_total{tool="read_path_meta",outcome="error"} 1"#,
        r#"rojos_tool_calls_total{tool="get_text_content",outcome="ok"} 1"#,
        r#"rojos_tool_calls_total{tool="get_text_content",outcome="error"} 1"#,
        r#"rojos_tool_calls_total{tool="list_files",outcome="error"} 1"#,
        r#"rojos_tool_calls_total{tool="unknown",outcome="error"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    drop(served.binary);
}

#[tokio::test]
async fn mcp_the_current_revision_is_negotiated_without_a_session() {
    let served = Served::start(&HostConfig::builtins());
    served.write("demo", "a.txt", "current\n");
    let url = format!("{}/mcp/demo", served.url);
    let calls = json!([["get_text_content", {"path": "a.txt"}]]);
    let session = sdk_session(&url, TOKEN, "modern", calls).await;
    assert_eq!(session["protocolVersion"], CURRENT_REVISION);
    // Without `?rojo=`, the default rojo: every loaded tool.
    let expected = as_mcp_tools(&served.get_json("/tools?rojo=default").await);
    assert_eq!(session["tools"].as_array().unwrap(), &expected);
    assert_eq!(call_results(&session), [(false, "current\n".to_owned())]);
}

#[tokio::test]
async fn mcp_calls_keep_the_time_out_and_the_result_cap() {
    let mut config = HostConfig::builtins().with("[limits]\nmax_result_bytes = 1024\n");
    config.call_timeout_secs = 1.0;
    config.load.push(plugin_lib("rojos_test_hang_tool"));
    let served = Served::start(&config);
    served.write("demo", "big.txt", &"x".repeat(5000));
    let url = format!("{}/mcp/demo", served.url);
    let calls = json!([
        ["hang_tool", {"seconds": 5}],
        ["get_text_content", {"path": "big.txt"}],
    ]);
    let session = sdk_session(&url, TOKEN, "legacy", calls).await;
    let results = call_results(&session);
    assert_eq!(
        results[0],
        (
            true,
            "error: tool hang_tool did not finish within 1.0 s and was abandoned".to_owned()
        )
    );
    let (cut_error, cut) = &results[1];
    assert!(!cut_error);
    assert_eq!(
        cut,
        &format!(
            "{}\n[result truncated by rojos: 3976 of 5000 bytes left out]",
            "x".repeat(1024)
        )
    );
}

/// A raw `initialize` POST to `path` with `token`: the status and the body.
async fn raw_initialize(url: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client()
        .post(format!("{url}{path}"))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE_REVISION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            }}),
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn mcp_needs_a_token_allowed_on_the_project_and_a_known_rojo() {
    let served = Served::start(&HostConfig::builtins());
    let url = &served.url;
    let unauthorized = (
        401,
        r#"{"error":"missing or invalid bearer token"}"#.to_owned(),
    );
    assert_eq!(raw_initialize(url, "/mcp/demo", None).await, unauthorized);
    assert_eq!(
        raw_initialize(url, "/mcp/demo", Some("not-a-token")).await,
        unauthorized
    );
    assert_eq!(
        raw_initialize(url, "/mcp/other", Some(DEMO_TOKEN)).await,
        (
            403,
            r#"{"error":"this token is not allowed on project other"}"#.to_owned()
        )
    );
    assert_eq!(
        raw_initialize(url, "/mcp/demo?rojo=nobody", Some(DEMO_TOKEN)).await,
        (
            400,
            r#"{"error":"unknown rojo \"nobody\" (this server has: default)"}"#.to_owned()
        )
    );
    let (status, body) = raw_initialize(url, "/mcp/demo", Some(DEMO_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""serverInfo":{"name":"rojos""#), "{body}");

    // The SDK cannot open a session there either (it reports any non-2xx answer to
    // `initialize` as this one error), and nothing of the other project is touched.
    let refused = tokio::process::Command::new("python3")
        .arg(SESSION_SCRIPT)
        .args([&format!("{url}/mcp/other"), DEMO_TOKEN, "legacy", "[]"])
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("python3 cannot be run ({e}): install Python 3, then {INSTALL}")
        });
    assert_ne!(refused.status.code(), Some(3), "install the SDK: {INSTALL}");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Server returned an error response"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!Path::new(&served.dir.path().join("storage/other")).exists());
}

#[tokio::test]
async fn mcp_over_stdio_serves_the_same_tools_to_a_launched_command() {
    let config = HostConfig::builtins().with(READER_ROJO);
    let dir = config.in_temp_folder();
    let root = dir.path().join("storage/demo/root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("note.txt"), "over stdio\n").unwrap();
    let config_path = dir.path().join("rojos.toml").display().to_string();
    let command = json!([
        env!("CARGO_BIN_EXE_rojos"),
        "--config",
        config_path,
        "mcp",
        "--project",
        "demo",
        "--rojo",
        "reader",
    ]);
    let calls = json!([
        ["get_text_content", {"path": "note.txt"}],
        ["get_text_content", {"path": "../../rojos.toml"}],
        ["list_files", {"path": "."}],
    ]);
    let session = sdk_session(&command.to_string(), "", "legacy", calls).await;
    assert_eq!(session["protocolVersion"], HANDSHAKE_REVISION);
    assert_eq!(session["server"], "rojos");
    let tools = binary::run(binary::rojos(&[
        "--config",
        &config_path,
        "tools",
        "--rojo",
        "reader",
    ]));
    assert_eq!(tools.code, Some(0), "{}", tools.stderr);
    let expected = as_mcp_tools(&serde_json::from_str(&tools.stdout).unwrap());
    assert_eq!(session["tools"].as_array().unwrap(), &expected);
    let results = call_results(&session);
    assert_eq!(results[0], (false, "over stdio\n".to_owned()));
    assert!(
        results[1].0 && results[1].1.contains("leads outside the project"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].0 && results[2].1.contains("is not enabled"),
        "{:?}",
        results[2]
    );

    // A bad project or rojo is refused before anything is served.
    for (args, message) in [
        (
            ["--project", "../x", "--rojo", "reader"],
            "invalid projectId \"../x\"",
        ),
        (
            ["--project", "demo", "--rojo", "nobody"],
            "unknown rojo \"nobody\"",
        ),
    ] {
        let mut command = binary::rojos(&["--config", &config_path, "mcp"]);
        command.args(args);
        let ran = binary::run(command);
        assert_eq!(ran.code, Some(2), "{}", ran.stderr);
        assert!(ran.stderr.contains(message), "{}", ran.stderr);
        assert_eq!(ran.stdout, "");
    }
}

#[tokio::test]
async fn mcp_a_call_the_client_cancels_is_dropped() {
    let mut config = HostConfig::builtins();
    config.call_timeout_secs = 30.0;
    config.load.push(plugin_lib("rojos_test_hang_tool"));
    let served = Served::start(&config);
    let url = format!("{}/mcp/demo", served.url);
    // The client waits half a second, then sends `notifications/cancelled`; the session goes
    // on with another call.
    let calls = json!([
        ["hang_tool", {"seconds": 20}, 0.5],
        ["list_files", {"path": "."}],
    ]);
    let started = std::time::Instant::now();
    let session = sdk_session(&url, TOKEN, "legacy", calls).await;
    let results = &session["calls"];
    assert_eq!(results[0]["isError"], Value::Null, "{results}");
    assert!(
        results[0]["text"].as_str().unwrap().contains("timed out"),
        "{results}"
    );
    assert_eq!(results[1]["isError"], false, "{results}");
    // The host dropped the call at once rather than waiting for the plugin's 20 s (or the
    // 30 s time-out): the session's end does not wait for it either.
    RunningBinary::wait_for(
        &served.binary.stderr,
        "the call was cancelled",
        "the cancelled call's error",
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // Dropped, not forgotten: the call is counted with its own outcome.
    served
        .wait_for_metric(r#"rojos_tool_calls_total{tool="hang_tool",outcome="cancelled"} 1"#)
        .await;
}

/// A rojo with the tests' own MCP server's `hang` (which logs `called hang` when it starts)
/// and `echo`, for calls that must overlap.
fn hang_and_echo_config() -> HostConfig {
    let mut config = HostConfig::builtins()
        .server("max_chats_per_token = 1")
        .with(&format!(
            "[mcp.servers.pytools]\ncommand = \"python3\"\nargs = [{:?}]\n\n\
             [rojos.py]\nprovider = \"scripted\"\ntools = [\"pytools__hang\", \"pytools__echo\"]\n",
            crate::mcp_client::SERVER_SCRIPT
        ));
    config.call_timeout_secs = 120.0;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_tokens_calls_hold_its_chat_places_and_a_second_is_refused_with_an_error_result() {
    let served = Served::start(&hang_and_echo_config());
    let url = format!("{}/mcp/demo?rojo=py", served.url);
    let echo = json!([["pytools__echo", {"text": "hi"}]]);
    // The first session's call hangs until its client gives up (30 s, generous so that the
    // second session surely runs meanwhile) and cancels it.
    let hanging = sdk_session(&url, TOKEN, "legacy", json!([["pytools__hang", {}, 30]]));
    let refused = async {
        served.wait_for_log("called hang").await;
        sdk_session(&url, TOKEN, "legacy", echo.clone()).await
    };
    let (hung, refused) = tokio::join!(hanging, refused);
    assert_eq!(hung["calls"][0]["isError"], Value::Null, "{hung}");
    assert_eq!(
        call_results(&refused),
        [(
            true,
            "not run: this token is at its limit of 1 open chats ([server] \
             max_chats_per_token); try again when one ends (an MCP tool call counts as a chat \
             while it runs)"
                .to_owned()
        )]
    );
    // The cancellation reaches the host after the client gave up; once the call is dropped
    // (and counted), its place is free again.
    served
        .wait_for_metric(r#"rojos_tool_calls_total{tool="pytools__hang",outcome="cancelled"} 1"#)
        .await;
    let after = sdk_session(&url, TOKEN, "legacy", echo).await;
    assert_eq!(
        call_results(&after),
        [(false, "echo: hi".to_owned())],
        "{}",
        served.binary.stderr.lock().unwrap()
    );
    served
        .wait_for_metric(r#"rojos_requests_limited_total{limit="token"} 1"#)
        .await;
}

// Live tool lists: `notifications/tools/list_changed` (`docs/mcp.md`, "Protocol").

/// The watching session's script, committed beside this file.
const WATCH_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp/watch.py");

/// How long a session that must not be notified waits, after the change has reached another
/// session (a bounded negative).
const QUIET_SECS: u64 = 3;

/// How long a session that must be notified may wait, on a busy machine.
const NOTIFIED_SECS: u64 = 60;

/// One open session of `mcp/watch.py`, waiting for `notifications/tools/list_changed`.
struct Watcher {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// The tools listed when the session opened.
    tools: Vec<String>,
}

impl Watcher {
    /// Opens a session at `endpoint` (a URL, or a JSON command line for stdio) that waits
    /// `wait_secs` for the notification once [`Watcher::outcome`] is asked for.
    async fn open(endpoint: &str, token: &str, wait_secs: u64) -> Watcher {
        Watcher::open_as(endpoint, token, wait_secs, "legacy").await
    }

    /// [`Watcher::open`] with `mode`: `legacy` (a handshake session) or `modern` (the
    /// `2026-07-28` revision, on a `subscriptions/listen` stream).
    async fn open_as(endpoint: &str, token: &str, wait_secs: u64, mode: &str) -> Watcher {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new("python3")
            .arg(WATCH_SCRIPT)
            .args([endpoint, token, &wait_secs.to_string(), mode])
            .stdout(std::process::Stdio::piped())
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("python3 cannot be run ({e}): install Python 3, then {INSTALL}")
            });
        let stdout = child.stdout.take().unwrap();
        let mut watcher = Watcher {
            child,
            lines: tokio::io::BufReader::new(stdout).lines(),
            tools: Vec::new(),
        };
        let first = watcher.line("its first tools/list").await;
        watcher.tools = names_of(&first);
        watcher
    }

    /// The next line the script prints, as JSON.
    async fn line(&mut self, what: &str) -> Value {
        let next = tokio::time::timeout(
            Duration::from_secs(NOTIFIED_SECS + 30),
            self.lines.next_line(),
        )
        .await
        .unwrap_or_else(|_| panic!("the watching session printed nothing for {what}"));
        match next.unwrap() {
            Some(line) => serde_json::from_str(&line).unwrap(),
            None => {
                let status = self.child.wait().await.unwrap();
                assert_ne!(
                    status.code(),
                    Some(3),
                    "the MCP Python SDK is missing; install it with: {INSTALL}"
                );
                panic!("the watching session ended ({status}) before {what}");
            }
        }
    }

    /// Whether the session was notified (since it opened, or within its wait from now),
    /// and the tools it lists after.
    async fn outcome(mut self) -> (bool, Vec<String>) {
        use tokio::io::AsyncWriteExt;
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"wait\n").await.unwrap();
        stdin.flush().await.unwrap();
        let last = self.line("the end of its wait").await;
        (last["notified"].as_bool().unwrap(), names_of(&last))
    }
}

fn names_of(line: &Value) -> Vec<String> {
    line["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

/// Rojo `all` (every tool) beside `reader`, a drop-in folder, and no `list_files` loaded.
fn dropin_config() -> HostConfig {
    let mut config = HostConfig::builtins()
        .with(READER_ROJO)
        .with("[rojos.all]\nprovider = \"scripted\"\ntools = \"*\"\n");
    config
        .load
        .retain(|p| !p.ends_with("librojos_tool_list_files.so"));
    config.dropin = true;
    config
}

/// Drops `list_files` into `dir`'s drop-in folder (copied under a dot-name, then renamed).
fn drop_in_list_files(dir: &Path) {
    let folder = dir.join("plugins.d");
    let tmp = folder.join(".liblist.so.tmp");
    std::fs::copy(plugin_lib("rojos_tool_list_files"), &tmp).unwrap();
    std::fs::rename(&tmp, folder.join("liblist.so")).unwrap();
}

#[tokio::test]
async fn mcp_sessions_whose_tools_change_are_notified_over_http() {
    let config = dropin_config();
    let dir = config.in_temp_folder();
    std::fs::create_dir(dir.path().join("plugins.d")).unwrap();
    let binary = RunningBinary::start(dir.path(), "info", &[]);
    let url = binary.url();

    // A drop-in: `all` gains list_files, `reader` offers the same.
    let all = Watcher::open(&format!("{url}/mcp/demo?rojo=all"), TOKEN, NOTIFIED_SECS).await;
    let reader = Watcher::open(&format!("{url}/mcp/demo?rojo=reader"), TOKEN, QUIET_SECS).await;
    assert!(
        !all.tools.contains(&"list_files".to_owned()),
        "{:?}",
        all.tools
    );
    drop_in_list_files(dir.path());
    let (notified, tools) = all.outcome().await;
    assert!(
        notified,
        "the session of `all` was not notified of the drop-in"
    );
    assert!(tools.contains(&"list_files".to_owned()), "{tools:?}");
    let (notified, tools) = reader.outcome().await;
    assert!(
        !notified,
        "the session of `reader` was notified, but its tools did not change"
    );
    assert_eq!(tools, ["get_text_content", "read_path_meta"]);

    // An edit of `reader`'s tools in rojos.toml: only `reader` is notified.
    let reader = Watcher::open(&format!("{url}/mcp/demo?rojo=reader"), TOKEN, NOTIFIED_SECS).await;
    let all = Watcher::open(&format!("{url}/mcp/demo?rojo=all"), TOKEN, QUIET_SECS).await;
    let mut edited = config.clone();
    edited.extra = edited.extra.replace(
        "tools = [\"read_path_meta\", \"get_text_content\"]",
        "tools = [\"read_path_meta\"]",
    );
    std::fs::write(dir.path().join(".rojos.toml.tmp"), edited.render()).unwrap();
    std::fs::rename(
        dir.path().join(".rojos.toml.tmp"),
        dir.path().join("rojos.toml"),
    )
    .unwrap();
    let (notified, tools) = reader.outcome().await;
    assert!(
        notified,
        "the session of `reader` was not notified of the edit"
    );
    assert_eq!(tools, ["read_path_meta"]);
    let (notified, _) = all.outcome().await;
    assert!(
        !notified,
        "the session of `all` was notified, but its tools did not change"
    );
}

#[tokio::test]
async fn mcp_a_stdio_session_is_notified_of_a_drop_in() {
    let config = dropin_config();
    let dir = config.in_temp_folder();
    std::fs::create_dir(dir.path().join("plugins.d")).unwrap();
    std::fs::create_dir_all(dir.path().join("storage/demo/root")).unwrap();
    let config_path = dir.path().join("rojos.toml").display().to_string();
    let command = |rojo: &str| {
        json!([
            env!("CARGO_BIN_EXE_rojos"),
            "--config",
            config_path,
            "mcp",
            "--project",
            "demo",
            "--rojo",
            rojo,
        ])
        .to_string()
    };
    let all = Watcher::open(&command("all"), "", NOTIFIED_SECS).await;
    let reader = Watcher::open(&command("reader"), "", QUIET_SECS).await;
    drop_in_list_files(dir.path());
    let (notified, tools) = all.outcome().await;
    assert!(
        notified,
        "the stdio session of `all` was not notified of the drop-in"
    );
    assert!(tools.contains(&"list_files".to_owned()), "{tools:?}");
    let (notified, _) = reader.outcome().await;
    assert!(
        !notified,
        "the stdio session of `reader` was notified, but its tools did not change"
    );
}

#[tokio::test]
async fn mcp_a_current_revision_listen_stream_is_notified_of_a_drop_in() {
    let config = dropin_config();
    let dir = config.in_temp_folder();
    std::fs::create_dir(dir.path().join("plugins.d")).unwrap();
    let binary = RunningBinary::start(dir.path(), "info", &[]);
    let url = binary.url();
    let all = Watcher::open_as(
        &format!("{url}/mcp/demo?rojo=all"),
        TOKEN,
        NOTIFIED_SECS,
        "modern",
    )
    .await;
    let reader = Watcher::open_as(
        &format!("{url}/mcp/demo?rojo=reader"),
        TOKEN,
        QUIET_SECS,
        "modern",
    )
    .await;
    drop_in_list_files(dir.path());
    let (notified, tools) = all.outcome().await;
    assert!(notified, "the listen stream of `all` got no list_changed");
    assert!(tools.contains(&"list_files".to_owned()), "{tools:?}");
    let (notified, _) = reader.outcome().await;
    assert!(
        !notified,
        "the listen stream of `reader` got list_changed, but its tools did not change"
    );
}

/// A tool the rojo's `approve` names is refused to MCP callers, who cannot give the user's
/// approval (`docs/mcp.md`, "Approvals"); its other tools run as usual.
#[tokio::test]
async fn mcp_a_tool_that_needs_approval_is_refused_with_an_error_result() {
    let config = HostConfig::builtins().with(
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\napprove = [\"write_text_content\"]\n",
    );
    let served = Served::start(&config);
    served.write("demo", "keep.txt", "original");
    let url = format!("{}/mcp/demo", served.url);
    let calls = json!([
        ["write_text_content", {"path": "keep.txt", "text": "changed"}],
        ["get_text_content", {"path": "keep.txt"}],
    ]);
    let results = call_results(&sdk_session(&url, TOKEN, "legacy", calls).await);
    assert_eq!(
        results[0],
        (
            true,
            "error: not run: this rojo requires the user's approval for write_text_content, \
             which an MCP caller cannot give; use the chat API or the panel"
                .to_owned()
        )
    );
    assert_eq!(results[1], (false, "original".to_owned()));
}

/// Under `approve = "destructive"`, a write that would replace an existing file needs the
/// user's approval, so an MCP caller's is refused; a write that creates a file runs
/// (`docs/configuration.md`, "Approvals").
#[tokio::test]
async fn mcp_a_write_that_replaces_a_file_under_approve_destructive_is_refused() {
    let config = HostConfig::builtins().with(
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\napprove = \"destructive\"\n",
    );
    let served = Served::start(&config);
    served.write("demo", "keep.txt", "original");
    let url = format!("{}/mcp/demo", served.url);
    let calls = json!([
        ["write_text_content", {"path": "keep.txt", "text": "changed"}],
        ["write_text_content", {"path": "new.txt", "text": "fresh"}],
        ["get_text_content", {"path": "keep.txt"}],
        ["get_text_content", {"path": "new.txt"}],
    ]);
    let results = call_results(&sdk_session(&url, TOKEN, "legacy", calls).await);
    assert!(results[0].0, "an error result: {:?}", results[0]);
    assert!(
        results[0]
            .1
            .contains("requires the user's approval for write_text_content"),
        "{:?}",
        results[0]
    );
    assert_eq!(results[1], (false, r#"{"ok":true}"#.to_owned()));
    assert_eq!(results[2], (false, "original".to_owned()));
    assert_eq!(results[3], (false, "fresh".to_owned()));
}
