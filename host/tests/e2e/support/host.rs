//! `TestHost`: the real server on `127.0.0.1:0` with a fresh storage folder, a config
//! written to disk and loaded like the binary loads it, and a bearer token for requests.

use std::path::{Path, PathBuf};

use rojos::{config::ConfigFile, state::AppState};
use tokio::sync::oneshot;

/// The token every test config allows on every project.
pub const TOKEN: &str = "test-token-all-projects";
/// A token allowed on project `demo` only.
pub const DEMO_TOKEN: &str = "test-token-demo-only";

/// A running host.
#[derive(Debug)]
pub struct TestHost {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The temp folder with `rojos.toml` and `storage/`.
    pub dir: tempfile::TempDir,
    shutdown: Option<oneshot::Sender<oneshot::Sender<()>>>,
    /// Told when the server has fully stopped (set by `restart`/`stop`).
    stopped: Option<oneshot::Sender<()>>,
}

/// Builds a config for a test host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Plugin libraries for `[plugins].load`.
    pub load: Vec<PathBuf>,
    /// Extra TOML appended to the generated config (rojos, providers, limits...).
    pub extra: String,
    /// The `base_url` of the `scripted` provider.
    pub provider_url: String,
    /// Whether `[plugins].dir = "plugins.d"` is set.
    pub dropin: bool,
    /// `[plugins].call_timeout_secs`.
    pub call_timeout_secs: f64,
    /// Extra keys of the `[server]` table (e.g. `max_concurrent_chats`).
    pub server: String,
    /// Extra keys of the `[auth]` table.
    pub auth: String,
    /// Extra keys of the `[plugins]` table (e.g. `isolation = "worker"`).
    pub plugins: String,
    /// A plugin loader of its own rather than the one shared by the test process, so its
    /// `[plugins]` worker settings (read when a library is loaded) are its own.
    pub own_loader: bool,
    /// With `own_loader`: the binary its workers (and its zygote) run, instead of the built
    /// `rojos` (a link to it under a name of the test's own finds them in `/proc`).
    pub worker_program: Option<PathBuf>,
}

impl HostConfig {
    /// The five built-in plugins and a `default` rojo with every tool.
    pub fn builtins() -> Self {
        HostConfig {
            load: super::builtin_libs(),
            extra: String::new(),
            provider_url: "http://127.0.0.1:9/v1".to_owned(),
            dropin: false,
            call_timeout_secs: 2.0,
            server: String::new(),
            auth: String::new(),
            plugins: String::new(),
            own_loader: false,
            worker_program: None,
        }
    }

    /// Adds a key to the `[server]` table (`max_concurrent_chats = 1`).
    pub fn server(mut self, line: &str) -> Self {
        self.server.push_str(line);
        self.server.push('\n');
        self
    }

    /// Adds a key to the `[auth]` table (`rate_limit_per_minute = 60`).
    pub fn auth(mut self, line: &str) -> Self {
        self.auth.push_str(line);
        self.auth.push('\n');
        self
    }

    /// Points the `scripted` provider at `upstream`.
    pub fn upstream(mut self, upstream: &super::upstream::ScriptedUpstream) -> Self {
        self.provider_url = upstream.base_url.clone();
        self
    }

    /// Appends TOML to the config.
    pub fn with(mut self, toml: &str) -> Self {
        self.extra.push_str(toml);
        self.extra.push('\n');
        self
    }

    /// A new temporary folder holding this config as `rojos.toml` (for the real binary).
    pub fn in_temp_folder(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("rojos.toml"), self.render()).expect("write config");
        dir
    }

    /// The config text, with the storage in `dir`.
    pub fn render(&self) -> String {
        let load: Vec<String> = self
            .load
            .iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect();
        let has_default_rojo = self.extra.contains("[rojos.default]");
        format!(
            r#"
[server]
bind = "127.0.0.1:0"
storage = "storage"
{server}
[auth]
{auth}
[[auth.tokens]]
token = "{TOKEN}"
projects = ["*"]

[[auth.tokens]]
token = "{DEMO_TOKEN}"
projects = ["demo"]

[plugins]
load = [{load}]
call_timeout_secs = {call_timeout}
{dropin}
{plugins}

[providers.scripted]
base_url = "{provider_url}"
model = "scripted-model"
# Far more than any test sends: only the tests of long conversations give a small window.
context_tokens = 1000000
max_attempts = 2
idle_timeout_secs = 5

{default_rojo}
{extra}
"#,
            load = load.join(", "),
            provider_url = self.provider_url,
            call_timeout = self.call_timeout_secs,
            server = self.server,
            auth = self.auth,
            plugins = self.plugins,
            dropin = if self.dropin {
                "dir = \"plugins.d\""
            } else {
                ""
            },
            default_rojo = if has_default_rojo {
                ""
            } else {
                "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\n"
            },
            extra = self.extra,
        )
    }
}

impl TestHost {
    /// Writes the config, starts the server, and waits until it accepts connections.
    pub async fn start(config: HostConfig) -> TestHost {
        TestHost::start_in(tempfile::tempdir().expect("temp dir"), config).await
    }

    /// Stops this host and starts a new one on the same folder (storage and database).
    pub async fn restart(mut self, config: HostConfig) -> TestHost {
        let (done_tx, done_rx) = oneshot::channel();
        self.stopped = Some(done_tx);
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"));
        drop(self);
        let _ = done_rx.await;
        TestHost::start_in(dir, config).await
    }

    async fn start_in(dir: tempfile::TempDir, config: HostConfig) -> TestHost {
        let config_path = dir.path().join("rojos.toml");
        std::fs::write(&config_path, config.render()).expect("write config");
        let loader = if config.own_loader {
            let loader = new_loader();
            std::sync::Arc::new(match &config.worker_program {
                Some(program) => loader.with_worker_program(program),
                None => loader,
            })
        } else {
            shared_loader()
        };
        let config =
            ConfigFile::load(&config_path).unwrap_or_else(|e| panic!("test config refused: {e}"));
        let state = AppState::start_with(config, loader)
            .unwrap_or_else(|e| panic!("host failed to start: {e}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (tx, rx) = oneshot::channel::<oneshot::Sender<()>>();
        tokio::spawn(async move {
            let (stopped_tx, stopped_rx) = oneshot::channel::<Option<oneshot::Sender<()>>>();
            rojos::serve(listener, state, async move {
                let notify = rx.await.ok();
                let _ = stopped_tx.send(notify);
            })
            .await
            .expect("server runs");
            if let Ok(Some(notify)) = stopped_rx.await {
                let _ = notify.send(());
            }
        });
        TestHost {
            url,
            dir,
            shutdown: Some(tx),
            stopped: None,
        }
    }

    /// The drop-in plugin folder (`plugins.d` beside the config).
    pub fn dropin_dir(&self) -> PathBuf {
        self.dir.path().join("plugins.d")
    }

    /// Rewrites `rojos.toml` (the host reloads it).
    pub fn rewrite_config(&self, config: &HostConfig) {
        let path = self.dir.path().join("rojos.toml");
        let tmp = self.dir.path().join(".rojos.toml.tmp");
        std::fs::write(&tmp, config.render()).expect("write config");
        std::fs::rename(tmp, path).expect("replace config");
    }

    /// The folder holding `rojos.toml`.
    pub fn config_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Shuts the server down (open chats end with `ERROR` + `DONE`) and waits for it.
    pub async fn stop(mut self) {
        let (done_tx, done_rx) = oneshot::channel();
        self.stopped = Some(done_tx);
        drop(self);
        let _ = done_rx.await;
    }

    /// `POST /chat` with `body` and the all-projects token.
    pub async fn chat(&self, body: serde_json::Value) -> reqwest::Response {
        self.chat_as(TOKEN, body).await
    }

    /// `POST /chat` with `body` and `token`.
    pub async fn chat_as(&self, token: &str, body: serde_json::Value) -> reqwest::Response {
        client()
            .post(format!("{}/chat", self.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request reaches the host")
    }

    /// Stops `conversation`'s run (`POST /conversations/{id}/stop`).
    pub async fn stop_run(&self, conversation: &str) -> reqwest::Response {
        stop_at(&self.url, conversation).await
    }

    /// The project's root folder on disk.
    pub fn project_root(&self, project: &str) -> PathBuf {
        self.dir.path().join("storage").join(project).join("root")
    }

    /// `GET path` with the all-projects token.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        get_at(&self.url, path).await
    }

    /// Every stored message of `conversation`, read back over the API page by page
    /// (`Rojos-Next-From`).
    pub async fn stored_messages(&self, conversation: &str) -> Vec<serde_json::Value> {
        stored_messages_at(&self.url, conversation).await
    }
}

/// `POST url/conversations/{conversation}/stop` with the all-projects token.
pub async fn stop_at(url: &str, conversation: &str) -> reqwest::Response {
    client()
        .post(format!("{url}/conversations/{conversation}/stop"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("stop is answered")
}

/// `POST url/chat` with the all-projects token and `body`, to the server at `url` (a test
/// host, a running binary or a proxy in front of them).
pub async fn chat_at(url: &str, body: &serde_json::Value) -> reqwest::Response {
    client()
        .post(format!("{url}/chat"))
        .bearer_auth(TOKEN)
        .json(body)
        .send()
        .await
        .expect("the chat request is answered")
}

/// `GET url/path` with the all-projects token, from the server at `url` (a test host, a
/// running binary or a proxy in front of them).
pub async fn get_at(url: &str, path: &str) -> reqwest::Response {
    client()
        .get(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the server answers")
}

/// `GET url/path` with the all-projects token from the server at `url` (a test host or a
/// running binary): its JSON body, after asserting `200`.
pub async fn get_json_at(url: &str, path: &str) -> serde_json::Value {
    let response = get_at(url, path).await;
    assert_eq!(response.status(), 200, "GET {path}");
    response.json().await.expect("a JSON body")
}

/// Every stored message of `conversation`, read through the server at `url` (a test host or
/// a running binary) page by page (`Rojos-Next-From`).
pub async fn stored_messages_at(url: &str, conversation: &str) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    let mut from = 0;
    loop {
        let response = client()
            .get(format!("{url}/conversations/{conversation}?from={from}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("the server answers");
        assert_eq!(
            response.status(),
            200,
            "reading conversation {conversation}"
        );
        let next = response
            .headers()
            .get("rojos-next-from")
            .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        let page: Vec<serde_json::Value> = response.json().await.expect("a page of messages");
        all.extend(page);
        match next {
            Some(next) => from = next,
            None => return all,
        }
    }
}

impl TestHost {
    /// The id of project `demo`'s only conversation (for runs whose client left before
    /// `DONE`, so the stream never named it).
    pub async fn only_conversation(&self) -> String {
        let listed: Vec<serde_json::Value> = self
            .get("/conversations?projectId=demo")
            .await
            .json()
            .await
            .expect("a conversation list");
        assert_eq!(listed.len(), 1, "{listed:?}");
        listed[0]["id"].as_str().expect("an id").to_owned()
    }

    /// The stored history of `conversation` once its run has closed it (it ends on an
    /// assistant message without tool calls), waiting generously (twenty seconds).
    pub async fn closed_history(&self, conversation: &str) -> Vec<serde_json::Value> {
        for _ in 0..400 {
            let stored = self.stored_messages(conversation).await;
            let last = stored.last().cloned().unwrap_or_default();
            if last["role"] == "assistant" && last.get("tool_calls").is_none() {
                return stored;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "the run never closed the history: {:?}",
            self.stored_messages(conversation).await
        );
    }
}

/// The stored size of `messages`: the bytes of each message's JSON, as the store counts them.
pub fn stored_bytes(messages: &[serde_json::Value]) -> usize {
    messages.iter().map(|m| m.to_string().len()).sum()
}

impl Drop for TestHost {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let (ignored, _) = oneshot::channel();
            let _ = tx.send(self.stopped.take().unwrap_or(ignored));
        }
    }
}

/// One loader for every host of the test process: a loaded library is never unloaded, so
/// each host loading its own copies would map hundreds of megabytes.
fn shared_loader() -> std::sync::Arc<rojos::plugins::Loader> {
    static LOADER: std::sync::OnceLock<std::sync::Arc<rojos::plugins::Loader>> =
        std::sync::OnceLock::new();
    LOADER
        .get_or_init(|| std::sync::Arc::new(new_loader()))
        .clone()
}

fn new_loader() -> rojos::plugins::Loader {
    // Workers are the real binary: this test executable is not `rojos`.
    rojos::plugins::Loader::new(8)
        .expect("plugin loader")
        .with_worker_program(env!("CARGO_BIN_EXE_rojos"))
}

/// A plain HTTP client.
pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}
