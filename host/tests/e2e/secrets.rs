//! Secrets stay out of the log: the real `rojos` binary runs as a child process, its whole
//! log (stderr, every level of the host and of the HTTP layer) is captured, and nothing in it
//! may show a configured token, also when a live edit puts a typo on the token's line.

use crate::support::binary::RunningBinary;
use crate::support::host::{client, get_at, HostConfig, DEMO_TOKEN, TOKEN};
use crate::support::upstream::{ScriptedUpstream, Turn};

/// The provider's API key (from the environment) and a key in its `base_url`'s query.
const API_KEY: &str = "sk-e2e-provider-key-1234";
const URL_KEY: &str = "AIza-e2e-url-key-5678";

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
    let rojos = RunningBinary::start(
        dir.path(),
        "trace,notify=info",
        &[("E2E_PROVIDER_KEY", API_KEY)],
    );
    let url = rojos.url();

    // An authenticated request first, so the request logging is checked too.
    assert_eq!(tools_status(&url).await, 200);
    // A chat, so the provider client's errors and logging are checked too: the error event
    // names the key's variable, and the log line carries the provider's message, scrubbed.
    let chat = client()
        .post(format!("{url}/chat"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"projectId": "demo", "message": "hi"}))
        .send()
        .await
        .unwrap();
    let events = chat.text().await.unwrap();
    assert!(
        events.contains("scripted refused the API key in E2E_PROVIDER_KEY"),
        "{events}"
    );
    RunningBinary::wait_for(
        &rojos.stderr,
        "answered HTTP 401: invalid key <redacted>",
        "the provider's scrubbed message in the log",
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

    // The refusal spans several log lines (the parser's excerpt of the file): wait for its
    // last one, so the whole message has been read.
    let log = RunningBinary::wait_for(
        &rojos.stderr,
        "unexpected key or value",
        "the refused reload",
    );
    assert!(log.contains("configuration not reloaded"), "{log}");
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
    get_at(url, "/tools?rojo=default").await.status().as_u16()
}
