//! Provider checks and the automatic choice of provider (docs/configuration.md, "Providers"): each provider is checked
//! in the background through its model list; a rojo uses the first of its providers that is
//! ready; with none, the server still starts, says why in its log and `GET /rojos`, and
//! `POST /chat` is a 503 with the fix that creates no conversation.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    binary::RunningBinary,
    host::{client, get_at, HostConfig, TestHost, TOKEN},
    ndjson::Stream,
    upstream::{Models, ScriptedUpstream, Turn},
};

/// The provider's API key, set only in the server's environment.
const API_KEY: &str = "sk-e2e-provider-key-1234";

/// A loopback URL nothing listens on.
fn unreachable_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("address"));
    drop(listener);
    url
}

/// `GET /rojos` as JSON, and the entry of rojo `name`.
async fn rojo_info(url: &str, name: &str) -> Value {
    let rojos: Value = get_at(url, "/rojos").await.json().await.expect("JSON");
    rojos
        .as_array()
        .and_then(|all| all.iter().find(|r| r["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no rojo {name} in {rojos}"))
}

/// Polls `GET /rojos` (generously: thirty seconds) until rojo `name` has `status`.
async fn until_status(url: &str, name: &str, status: &str) -> Value {
    for _ in 0..300 {
        let info = rojo_info(url, name).await;
        if info["status"] == status {
            return info;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "rojo {name} never became {status}: {}",
        rojo_info(url, name).await
    );
}

/// The real binary serving `config` from a fresh folder (with `E2E_PROVIDER_KEY` set in its
/// environment only), once it listens: its URL, the process and the folder.
async fn start_binary(config: HostConfig) -> (String, RunningBinary, tempfile::TempDir) {
    tokio::task::spawn_blocking(move || {
        let dir = config.in_temp_folder();
        let server = RunningBinary::start(
            dir.path(),
            "trace,notify=info",
            &[("E2E_PROVIDER_KEY", API_KEY)],
        );
        (server.url(), server, dir)
    })
    .await
    .expect("the binary starts")
}

#[tokio::test]
async fn a_hosted_kind_whose_key_variable_is_set_is_chosen_and_sent_the_key() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("hello from openai")]).await;
    upstream.set_models(Models::List(vec!["gpt-4.1-mini-2025-04-14".into()]));
    let config = HostConfig::builtins().with(&format!(
        r#"
[providers.gone]
kind = "ollama"
base_url = "{gone}"

[providers.hosted]
kind = "openai"
base_url = "{url}"
api_key_env = "E2E_PROVIDER_KEY"

[rojos.default]
provider = ["gone", "hosted"]
tools = "*"
"#,
        gone = unreachable_url(),
        url = upstream.base_url
    ));
    let (url, server, _dir) = start_binary(config).await;

    let info = until_status(&url, "default", "ready").await;
    assert_eq!(
        info["provider"],
        json!({"name": "hosted", "label": "OpenAI", "model": "gpt-4.1-mini"}),
        "{info}"
    );
    let response = client()
        .post(format!("{url}/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"projectId": "demo", "message": "hi"}))
        .send()
        .await
        .unwrap();
    let stream = Stream::read(response).await;
    assert_eq!(stream.text(), "hello from openai", "{stream:#?}");
    let sent = format!("Bearer {API_KEY}");
    assert_eq!(
        upstream.received()[0].headers["authorization"],
        sent.as_str()
    );
    assert_eq!(upstream.received()[0].body["model"], "gpt-4.1-mini");
    assert_eq!(
        upstream.models_received()[0]["authorization"],
        sent.as_str()
    );
    let stderr = std::sync::Arc::clone(&server.stderr);
    tokio::task::spawn_blocking(move || {
        RunningBinary::wait_for(
            &stderr,
            "rojo default uses provider hosted (OpenAI, model gpt-4.1-mini)",
            "the line naming the rojo's provider",
        )
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_reachable_local_server_after_an_unreachable_one_is_chosen_with_its_first_chat_model() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("hello from ollama")]).await;
    upstream.set_models(Models::List(vec![
        "nomic-embed-text:latest".into(),
        "qwen2.5:7b".into(),
    ]));
    let config = HostConfig::builtins().with(&format!(
        r#"
[providers.gone]
kind = "lmstudio"
base_url = "{gone}"

[providers.local]
kind = "ollama"
base_url = "{url}"

[rojos.default]
provider = ["gone", "local"]
tools = "*"
"#,
        gone = unreachable_url(),
        url = upstream.base_url
    ));
    let host = TestHost::start(config).await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "hi"}))
            .await,
    )
    .await;
    assert_eq!(stream.text(), "hello from ollama", "{stream:#?}");
    assert_eq!(upstream.received()[0].body["model"], "qwen2.5:7b");
    let info = rojo_info(&host.url, "default").await;
    assert_eq!(info["status"], "ready", "{info}");
    assert_eq!(info["model"], "qwen2.5:7b", "{info}");
    assert_eq!(info["provider"]["name"], "local", "{info}");
    assert_eq!(info["fix"], Value::Null, "{info}");
}

#[tokio::test]
async fn with_no_provider_available_the_server_starts_warns_and_refuses_chats_with_the_fix() {
    let gone = unreachable_url();
    let host_port = gone
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let config = HostConfig::builtins().with(&format!(
        r#"
[providers.gone]
kind = "ollama"
base_url = "{gone}"

[providers.nokey]
kind = "openai"
api_key_env = "E2E_KEY_NOBODY_SETS"

[rojos.default]
provider = ["gone", "nokey"]
tools = "*"
"#
    ));
    let (url, server, _dir) = start_binary(config).await;
    let fix = format!(
        "Ollama is not running at {host_port}: start it with `ollama serve` and pull a model \
         with tool support (`ollama pull qwen2.5:7b`), or set another provider in rojos.toml; \
         or export one of E2E_KEY_NOBODY_SETS and restart the server"
    );
    let stderr = std::sync::Arc::clone(&server.stderr);
    let needle = format!("rojo default has no provider available: {fix}");
    let log = tokio::task::spawn_blocking(move || {
        RunningBinary::wait_for(&stderr, &needle, "the startup warning")
    })
    .await
    .unwrap();
    assert!(
        log.contains(
            "provider nokey is unavailable: OpenAI has no API key: set E2E_KEY_NOBODY_SETS"
        ),
        "{log}"
    );
    let info = rojo_info(&url, "default").await;
    assert_eq!(info["status"], "unavailable", "{info}");
    assert_eq!(info["fix"], fix.as_str(), "{info}");
    assert_eq!(info["provider"], Value::Null, "{info}");

    let response = client()
        .post(format!("{url}/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"projectId": "demo", "message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], fix.as_str());
    let listed: Value = client()
        .get(format!("{url}/conversations?projectId=demo"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, json!([]), "a refused chat leaves no conversation");
}

#[tokio::test]
async fn a_provider_that_never_answers_delays_nothing_and_shows_as_checking() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = silent.local_addr().unwrap();
    // Accepts connections and keeps them open without a word.
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let config = HostConfig::builtins().with(&format!(
        "[providers.silent]\nkind = \"ollama\"\nbase_url = \"http://{address}/v1\"\n\n\
         [rojos.default]\nprovider = \"silent\"\ntools = \"*\"\n"
    ));
    let host = TestHost::start(config).await;
    let health = client()
        .get(format!("{}/healthz", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let info = rojo_info(&host.url, "default").await;
    assert_eq!(info["status"], "checking", "{info}");
    assert_eq!(info["provider"], Value::Null, "{info}");
    assert_eq!(info["fix"], Value::Null, "{info}");
}

#[tokio::test]
async fn a_local_server_that_gets_a_model_later_is_picked_up() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("now I can")]).await;
    upstream.set_models(Models::List(vec!["nomic-embed-text:latest".into()]));
    let config = HostConfig::builtins().with(&format!(
        "[providers.local]\nkind = \"ollama\"\nbase_url = \"{}\"\n\n\
         [rojos.default]\nprovider = \"local\"\ntools = \"*\"\n",
        upstream.base_url
    ));
    let host = TestHost::start(config).await;
    let info = until_status(&host.url, "default", "unavailable").await;
    let fix = info["fix"].as_str().unwrap().to_owned();
    assert!(fix.starts_with("Ollama at 127.0.0.1:"), "{fix}");
    assert!(fix.contains("has no chat model"), "{fix}");
    let refused = host
        .chat(json!({"projectId": "demo", "message": "hi"}))
        .await;
    assert_eq!(refused.status(), 503);

    upstream.set_models(Models::List(vec!["qwen2.5:7b".into()]));
    // A chat re-checks its providers (at most every few seconds): one gets through.
    let mut answered = None;
    for _ in 0..60 {
        let response = host
            .chat(json!({"projectId": "demo", "message": "hi"}))
            .await;
        if response.status() == 200 {
            answered = Some(Stream::read(response).await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stream = answered.expect("the chat never got through");
    assert_eq!(stream.text(), "now I can", "{stream:#?}");
    assert_eq!(upstream.received()[0].body["model"], "qwen2.5:7b");
    let info = rojo_info(&host.url, "default").await;
    assert_eq!(info["status"], "ready", "{info}");
}

#[tokio::test]
async fn a_provider_asking_for_a_key_is_unavailable_with_the_fix() {
    let upstream = ScriptedUpstream::start(vec![]).await;
    upstream.set_models(Models::Status(401));
    let config = HostConfig::builtins().with(&format!(
        "[providers.local]\nbase_url = \"{}\"\nmodel = \"m\"\n\n\
         [rojos.default]\nprovider = \"local\"\ntools = \"*\"\n",
        upstream.base_url
    ));
    let host = TestHost::start(config).await;
    let info = until_status(&host.url, "default", "unavailable").await;
    assert_eq!(
        info["fix"],
        "local refused the request as unauthenticated: set `api_key_env` in [providers.local] \
         to the variable holding its API key",
        "{info}"
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn an_edit_of_rojos_toml_rechecks_the_provider_that_changed() {
    let upstream = ScriptedUpstream::start(vec![]).await;
    upstream.set_models(Models::List(vec!["qwen2.5:7b".into()]));
    let provider = |url: &str| {
        HostConfig::builtins().with(&format!(
            "[providers.local]\nkind = \"ollama\"\nbase_url = \"{url}\"\n\n\
             [rojos.default]\nprovider = \"local\"\ntools = \"*\"\n"
        ))
    };
    let host = TestHost::start(provider(&unreachable_url())).await;
    until_status(&host.url, "default", "unavailable").await;
    host.rewrite_config(&provider(&upstream.base_url));
    let info = until_status(&host.url, "default", "ready").await;
    assert_eq!(info["model"], "qwen2.5:7b", "{info}");
}
