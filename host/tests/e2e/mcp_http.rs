//! Streamable HTTP MCP servers as tool sources (`docs/mcp.md`, "HTTP servers"), on the real
//! binary: host A lists host B's `/mcp/demo?rojo=reader` as `[mcp.servers.peer]` with its
//! `Authorization` header read from the environment (the secret never in A's log or `rojos
//! check`; a wrong token reported as a 401), and the official Python SDK's Streamable HTTP
//! server (`mcp/tool_server.py --http PORT`) crashing in a call and started again on the same
//! port: the call an error result, a later call reconnected.
//!
//! Without python3 or the `mcp` package the SDK test fails with the command that installs it.

use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{
    mcp_client::{offered_tool_names, require_python_sdk, SERVER_SCRIPT},
    support::{
        binary::{self, Ran, RunningBinary},
        host::{chat_at, HostConfig, DEMO_TOKEN},
        ndjson::Stream,
        upstream::{ScriptedUpstream, Turn},
    },
};

/// Host B's rojo that may only read, served at `/mcp/demo?rojo=reader`.
const READER_ROJO: &str =
    "[rojos.reader]\nprovider = \"scripted\"\ntools = [\"read_path_meta\", \"get_text_content\"]\n";

/// A rojos binary serving `config` from a folder of its own, project `demo` created.
struct Host {
    binary: RunningBinary,
    url: String,
    dir: tempfile::TempDir,
}

impl Host {
    fn start(config: &HostConfig, env: &[(&str, &str)]) -> Host {
        let dir = config.in_temp_folder();
        std::fs::create_dir_all(dir.path().join("storage/demo/root")).unwrap();
        let binary = RunningBinary::start(dir.path(), "info", env);
        let url = binary.url();
        Host { binary, url, dir }
    }

    fn log(&self) -> String {
        self.binary.stderr.lock().unwrap().clone()
    }

    /// `rojos check` on this host's config, with `env`.
    fn check(&self, env: &[(&str, &str)]) -> Ran {
        let path = self.dir.path().join("rojos.toml");
        let mut command = binary::rojos(&["check", "--config", &path.to_string_lossy()]);
        command.envs(env.iter().copied());
        binary::run(command)
    }

    async fn tool_names(&self, rojo: &str) -> Vec<String> {
        offered_tool_names(&self.url, rojo).await
    }

    async fn chat(&self, rojo: &str, message: &str) -> Stream {
        let body = json!({"projectId": "demo", "rojo": rojo, "message": message});
        Stream::read(chat_at(&self.url, &body).await).await
    }
}

/// Host A's config: `[mcp.servers.peer]` at `url`, its Authorization from `PEER_AUTH`.
fn peer_config(url: &str, upstream: Option<&ScriptedUpstream>) -> HostConfig {
    let config = HostConfig::builtins().with(&format!(
        r#"
[mcp.servers.peer]
url = "{url}"
headers = {{ X-Rojos-Test = "peer" }}
headers_from = {{ Authorization = "PEER_AUTH" }}
start_timeout_secs = 20

[rojos.viapeer]
provider = "scripted"
tools = ["peer__*"]
"#
    ));
    match upstream {
        Some(upstream) => config.upstream(upstream),
        None => config,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_another_rojos_is_a_tool_source_with_its_token_from_the_environment() {
    let b = Host::start(&HostConfig::builtins().with(READER_ROJO), &[]);
    std::fs::write(
        b.dir.path().join("storage/demo/root/note.txt"),
        "hello from B\n",
    )
    .unwrap();
    let peer_url = format!("{}/mcp/demo?rojo=reader", b.url);
    let auth = format!("Bearer {DEMO_TOKEN}");
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "peer__read_path_meta", json!({"path": "note.txt"}))]),
        Turn::text("done"),
    ])
    .await;
    let a = Host::start(
        &peer_config(&peer_url, Some(&upstream)),
        &[("PEER_AUTH", &auth)],
    );

    assert_eq!(
        a.tool_names("viapeer").await,
        ["peer__get_text_content", "peer__read_path_meta"]
    );
    let results = a.chat("viapeer", "what is note.txt?").await.results();
    let [(name, ok, text)] = results.as_slice() else {
        panic!("one tool result expected: {results:#?}")
    };
    assert!(name == "peer__read_path_meta" && *ok, "{results:#?}");
    let meta: serde_json::Value = serde_json::from_str(text).expect("B's JSON answer");
    assert_eq!((&meta["type"], &meta["size"]), (&json!("file"), &json!(13)));
    upstream.assert_consumed();
    // 13 bytes is B's note.txt: A's own project holds no such file.
    assert!(!a.dir.path().join("storage/demo/root/note.txt").exists());
    assert!(
        !a.log().contains(DEMO_TOKEN),
        "the peer's token is in A's log:\n{}",
        a.log()
    );

    let checked = a.check(&[("PEER_AUTH", &auth)]);
    assert_eq!(checked.code, Some(0), "{checked}");
    assert!(
        checked.stdout.contains("MCP server peer: 2 tools"),
        "{checked}"
    );
    assert!(!checked.to_string().contains(DEMO_TOKEN), "{checked}");

    let refused = a.check(&[("PEER_AUTH", "Bearer not-a-token-of-b")]);
    assert!(
        refused.stdout.contains("MCP server peer: not started: ")
            && refused.stdout.contains("401 Unauthorized")
            && refused.stdout.contains("headers_from"),
        "{refused}"
    );
    assert!(
        !refused.to_string().contains("not-a-token-of-b"),
        "{refused}"
    );
}

#[test]
fn mcp_http_a_missing_header_variable_is_a_config_error() {
    let config = peer_config("http://127.0.0.1:9/mcp", None);
    let dir = config.in_temp_folder();
    let path = dir.path().join("rojos.toml");
    let mut command = binary::rojos(&["check", "--config", &path.to_string_lossy()]);
    command.env_remove("PEER_AUTH");
    let ran = binary::run(command);
    assert_ne!(ran.code, Some(0), "{ran}");
    assert!(
        ran.to_string().contains(
            "mcp.servers.peer.headers_from.Authorization: the environment variable PEER_AUTH is not set"
        ),
        "{ran}"
    );
}

/// `tool_server.py --http PORT`, killed when dropped.
struct SdkServer(Child);

impl SdkServer {
    /// Starts the script on `port` and waits (generously) until it accepts connections.
    fn start(port: u16) -> SdkServer {
        let child = Command::new("python3")
            .args([SERVER_SCRIPT, "--http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3");
        let server = SdkServer(child);
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "tool_server.py --http {port} never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Waits (generously) until the process has ended by itself.
    fn wait_ended(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.0.try_wait().expect("poll python3").is_none() {
            assert!(
                Instant::now() < deadline,
                "the crash tool did not end the server"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for SdkServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free now on loopback.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_a_crashed_sdk_server_is_an_error_result_and_reconnected_when_back() {
    require_python_sdk();
    let port = free_port();
    let mut server = SdkServer::start(port);
    // Each chat is a call and a closing text; after the crash, retries (one per chat, a back-off
    // apart) until the server is back, so the script has room for several.
    let mut turns = vec![
        Turn::tool_calls(&[("c1", "pyhttp__pid", json!({}))]),
        Turn::text("first"),
        Turn::tool_calls(&[("c2", "pyhttp__crash", json!({}))]),
        Turn::text("crashed"),
    ];
    for i in 0..20 {
        turns.push(Turn::tool_calls(&[(
            &format!("r{i}"),
            "pyhttp__pid",
            json!({}),
        )]));
        turns.push(Turn::text("again"));
    }
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "[mcp.servers.pyhttp]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
         [rojos.http]\nprovider = \"scripted\"\ntools = [\"pyhttp__*\"]\n"
    ));
    let a = Host::start(&config, &[]);

    let first = a.chat("http", "pid?").await.results();
    let (_, ok, first_pid) = &first[0];
    assert!(*ok, "{first:#?}");
    assert_eq!(first_pid, &server.0.id().to_string());

    let crashed = a.chat("http", "crash").await.results();
    let (name, ok, text) = &crashed[0];
    assert!(name == "pyhttp__crash" && !ok, "{crashed:#?}");
    assert!(
        text.starts_with("error: ") && text.contains("pyhttp"),
        "{text}"
    );
    server.wait_ended();

    // Nothing listens on the port now: the connection is refused.
    let refused = a.chat("http", "pid while down?").await.results();
    let (_, ok, text) = &refused[0];
    assert!(!ok && text.contains("MCP server pyhttp"), "{refused:#?}");

    let restarted = SdkServer::start(port);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let results = a.chat("http", "pid again?").await.results();
        let (_, ok, text) = &results[0];
        if *ok {
            assert_eq!(text, &restarted.0.id().to_string(), "not the new server");
            break;
        }
        assert!(
            text.contains("MCP server pyhttp"),
            "an error result that does not name the server: {text}"
        );
        assert!(
            Instant::now() < deadline,
            "no call reached the restarted server: {text}\n{}",
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}
