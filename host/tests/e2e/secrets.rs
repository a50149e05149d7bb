//! Secrets stay out of the log: the real `rojos` binary runs as a child process, its whole
//! log (stderr, every level of the host and of the HTTP layer) is captured, and nothing in it
//! may show a configured token, also when a live edit puts a typo on the token's line.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::host::{client, HostConfig, DEMO_TOKEN, TOKEN};
use crate::support::upstream::{ScriptedUpstream, Turn};

/// The provider's API key (from the environment) and a key in its `base_url`'s query.
pub(crate) const API_KEY: &str = "sk-e2e-provider-key-1234";
const URL_KEY: &str = "AIza-e2e-url-key-5678";

/// `rojos` serving the config in `dir`, its stdout and stderr read into shared text.
pub(crate) struct RunningBinary {
    child: Child,
    pub(crate) stdout: Arc<Mutex<String>>,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl RunningBinary {
    pub(crate) fn start(dir: &std::path::Path) -> RunningBinary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rojos"))
            .arg("--config")
            .arg(dir.join("rojos.toml"))
            .env("RUST_LOG", "trace,notify=info")
            .env("E2E_PROVIDER_KEY", API_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rojos");
        let stdout = collect(child.stdout.take().expect("piped stdout"));
        let stderr = collect(child.stderr.take().expect("piped stderr"));
        RunningBinary {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits (generously) until `text` holds `needle`, then returns all of it.
    pub(crate) fn wait_for(text: &Mutex<String>, needle: &str, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = text.lock().expect("log lock").clone();
            if seen.contains(needle) {
                return seen;
            }
            assert!(Instant::now() < deadline, "{what} never came:\n{seen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The address from `rojos listening on http://ADDR/`.
    pub(crate) fn url(&self) -> String {
        let out = Self::wait_for(&self.stdout, "rojos listening on ", "the listening line");
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("rojos listening on "))
            .expect("listening line");
        line.trim_end_matches('/').to_owned()
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut text = sink.lock().expect("log lock");
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

#[tokio::test]
async fn the_log_shows_no_token_or_provider_key_even_after_a_typo_on_the_token_line() {
    // A provider that quotes the key it was sent, as some proxies do.
    let upstream = ScriptedUpstream::start(vec![Turn::status(
        401,
        &format!("invalid key {API_KEY} (query key={URL_KEY})"),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut with_keys = HostConfig::builtins().upstream(&upstream);
    with_keys.provider_url = format!("{}?key={URL_KEY}", upstream.base_url);
    let config = with_keys.render().replace(
        "model = \"scripted-model\"",
        "model = \"scripted-model\"\napi_key_env = \"E2E_PROVIDER_KEY\"",
    );
    let path = dir.path().join("rojos.toml");
    std::fs::write(&path, &config).unwrap();
    let rojos = RunningBinary::start(dir.path());
    let url = rojos.url();

    // An authenticated request first, so the request logging is checked too.
    assert_eq!(tools_status(&url).await, 200);
    // A chat, so the provider client's errors and logging are checked too: the error event
    // and the log line carry the provider's message, scrubbed.
    let chat = client()
        .post(format!("{url}/chat"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"projectId": "demo", "message": "hi"}))
        .send()
        .await
        .unwrap();
    let events = chat.text().await.unwrap();
    assert!(
        events.contains("answered HTTP 401: invalid key <redacted>"),
        "{events}"
    );
    assert!(
        !events.contains(API_KEY) && !events.contains(URL_KEY),
        "{events}"
    );
    let received = upstream.received();
    assert_eq!(
        received[0]
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap()),
        Some(format!("Bearer {API_KEY}").as_str()),
        "the key was sent"
    );

    let typo = config.replace(
        &format!("token = \"{TOKEN}\""),
        &format!("token = \"{TOKEN}\" projects = [\"*\"]"),
    );
    assert_ne!(typo, config, "the token line was not found");
    let tmp = dir.path().join(".rojos.toml.tmp");
    std::fs::write(&tmp, typo).unwrap();
    std::fs::rename(&tmp, &path).unwrap();

    let log = RunningBinary::wait_for(
        &rojos.stderr,
        "configuration not reloaded",
        "the refused reload",
    );
    // The reload really reported the parse error, on the token's line.
    assert!(log.contains("token = <redacted>"), "{log}");
    assert!(log.contains("unexpected key or value"), "{log}");
    for secret in [TOKEN, DEMO_TOKEN, API_KEY, URL_KEY] {
        assert!(!log.contains(secret), "the log shows a secret:\n{log}");
    }
    // The running configuration stays: the token still works.
    assert_eq!(tools_status(&url).await, 200);
    let all = format!(
        "{}{}",
        rojos.stdout.lock().unwrap(),
        rojos.stderr.lock().unwrap()
    );
    for secret in [TOKEN, DEMO_TOKEN, API_KEY, URL_KEY] {
        assert!(!all.contains(secret), "{all}");
    }
}

/// The status of an authenticated `GET /tools` on the server at `url`.
async fn tools_status(url: &str) -> u16 {
    client()
        .get(format!("{url}/tools?rojo=default"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}
