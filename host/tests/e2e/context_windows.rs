//! Each rojo knows its model's real window: where the config gives none, the provider is
//! asked (a model list with lengths, Ollama's `/api/show` and `/api/ps`, LM Studio's
//! `/api/v0/models`), `GET /rojos` shows the window and where it came from, and requests are
//! fitted to it from the first. An Ollama that cuts a request too long for the window it
//! loaded, without an error, has its turn fitted again and asked once more: the client sees
//! one `WARNING`, never the answer made from the cut request.

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::{Event, Stream},
    server_info::ollama_show,
    upstream::{Models, ScriptedUpstream, Turn, CUT_ANSWER},
};

fn read_note() -> Turn {
    Turn::tool_calls(&[("call_read", "get_text_content", json!({"path": "note.txt"}))])
}

fn answer() -> Turn {
    Turn::text("It is a note about kettles.")
}

/// A provider `name` of `kind` (none: a plain OpenAI-compatible endpoint) at `upstream`.
fn provider(name: &str, kind: Option<&str>, upstream: &ScriptedUpstream, model: &str) -> String {
    let kind = kind.map_or(String::new(), |k| format!("kind = \"{k}\"\n"));
    format!(
        "[providers.{name}]\n{kind}base_url = \"{}\"\nmodel = \"{model}\"\n",
        upstream.base_url
    )
}

fn seed_note(host: &TestHost, lines: usize) {
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    let note: String = (0..lines)
        .map(|n| format!("Line {n:03}: kettles boil water for tea.\n"))
        .collect();
    std::fs::write(root.join("note.txt"), note).unwrap();
}

async fn ask(host: &TestHost, conversation: Option<&str>, message: &str) -> Stream {
    let mut body = json!({"projectId": "demo", "message": message});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    Stream::read(host.chat(body).await).await
}

/// `GET /rojos` once every rojo's provider is checked.
async fn rojos_when_ready(host: &TestHost) -> Vec<Value> {
    for _ in 0..200 {
        let rojos: Vec<Value> = host.get("/rojos").await.json().await.unwrap();
        if rojos.iter().all(|r| r["status"] == "ready") {
            return rojos;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the rojos' providers never became ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rojo_shows_its_window_and_where_it_came_from() {
    let upstream = ScriptedUpstream::start_ollama(
        "qwen2.5:7b",
        ollama_show(Some(6_144)),
        6_144,
        read_note(),
        answer(),
    )
    .await;
    // A model list in OpenRouter's shape, with lengths.
    upstream.set_models(Models::Raw(json!({"data": [
        {"id": "scripted-model", "context_length": 2_000_000},
        {"id": "listed-model", "name": "Listed", "context_length": 12_000,
         "top_provider": {"context_length": 12_000, "max_completion_tokens": 4_096, "is_moderated": false}},
        {"id": "qwen2.5:7b"},
        {"id": "qwen2.5-7b-instruct"}
    ]})));
    upstream.info().set_lmstudio(json!({"object": "list", "data": [
        {"id": "qwen2.5-7b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community",
         "arch": "qwen2", "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
         "max_context_length": 32_768, "loaded_context_length": 16_384}
    ]}));
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "{}{}{}\
         [rojos.listed]\nprovider = \"listed\"\n\
         [rojos.pinned]\nprovider = \"listed\"\ncontext_tokens = 9000\n\
         [rojos.local]\nprovider = \"ollama\"\n\
         [rojos.studio]\nprovider = \"lms\"\n",
        provider("listed", None, &upstream, "listed-model"),
        provider("ollama", Some("ollama"), &upstream, "qwen2.5:7b"),
        provider("lms", Some("lmstudio"), &upstream, "qwen2.5-7b-instruct"),
    ));
    let host = TestHost::start(config).await;
    let rojos = rojos_when_ready(&host).await;
    let window = |name: &str| {
        let rojo = rojos.iter().find(|r| r["name"] == name).unwrap();
        (
            rojo["context"]["tokens"].as_u64(),
            rojo["context"]["source"].as_str().map(str::to_owned),
        )
    };
    let at = |tokens: u64, source: &str| (Some(tokens), Some(source.to_owned()));
    // The scripted provider's own `context_tokens` wins over its list.
    assert_eq!(window("default"), at(1_000_000, "provider"));
    assert_eq!(window("listed"), at(12_000, "listed"));
    assert_eq!(window("pinned"), at(9_000, "rojo"));
    // The Modelfile's num_ctx: what Ollama will load, not the model's 32,768.
    assert_eq!(window("local"), at(6_144, "loaded"));
    assert_eq!(window("studio"), at(16_384, "loaded"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_the_provider_lists_is_planned_for_from_the_first_request() {
    const OVERFLOW: &str = r#"{"error":{"message":"This model's maximum context length is 2500 tokens. However, your messages resulted in 3120 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    // Smaller than the 8,192 assumed of a model nothing tells about.
    let upstream =
        ScriptedUpstream::start_windowed(2_500, (400, OVERFLOW), read_note(), answer()).await;
    upstream.set_models(Models::Raw(json!({"object": "list", "data": [
        {"id": "scripted-model", "object": "model"},
        {"id": "listed-model", "object": "model", "context_length": 2_500}
    ]})));
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "[rojos.default]\nprovider = \"listed\"\ntools = [\"get_text_content\"]\n{}",
        provider("listed", None, &upstream, "listed-model")
    ));
    let host = TestHost::start(config).await;
    seed_note(&host, 20);
    // Every message carries 3 KB: a few of them outgrow the listed window.
    let pasted: String = (0..50)
        .map(|n| format!("Pasted line {n:02}: the kettle whistles.\n"))
        .collect();
    let mut conversation = None;
    for n in 0..6 {
        let message = format!("Message {n}: what is note.txt about? I have:\n{pasted}");
        let stream = ask(&host, conversation.as_deref(), &message).await;
        assert_eq!(stream.errors(), Vec::<String>::new(), "message {n}");
        assert_eq!(stream.done().1, "completed", "message {n}");
        conversation = Some(stream.done().0);
    }
    assert_eq!(
        upstream.over_window(),
        0,
        "every request was fitted to the listed window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_that_cuts_a_request_silently_gets_it_fitted_and_asked_again() {
    // Its Modelfile sets no num_ctx: Ollama loads its server's default.
    let upstream = ScriptedUpstream::start_ollama(
        "qwen2.5:7b",
        ollama_show(None),
        32_768,
        read_note(),
        answer(),
    )
    .await;
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "[rojos.default]\nprovider = \"ollama\"\ntools = [\"get_text_content\"]\n{}",
        provider("ollama", Some("ollama"), &upstream, "qwen2.5:7b")
    ));
    let host = TestHost::start(config).await;
    seed_note(&host, 160);
    let first = ask(&host, None, "Message 0: what is note.txt about?").await;
    assert_eq!(first.done().1, "completed");
    let conversation = first.done().0;
    // The server restarts with a small default window (`OLLAMA_CONTEXT_LENGTH`); the model
    // is loaded again on the next request, with that.
    upstream.info().restart_ollama(1_200);
    let pasted: String = (0..60)
        .map(|n| format!("Pasted line {n:02}: the kettle whistles when the water boils.\n"))
        .collect();
    let stream = ask(
        &host,
        Some(&conversation),
        &format!("Message 1: what is note.txt about? Here is what I have:\n{pasted}"),
    )
    .await;
    assert_eq!(stream.errors(), Vec::<String>::new());
    assert_eq!(stream.done().1, "completed");
    assert!(
        upstream.over_window() >= 1,
        "the request before the window was known was cut"
    );
    let text: String = stream
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Chat { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !text.contains(CUT_ANSWER),
        "the cut request's answer was shown: {text}"
    );
    assert!(text.contains("kettles"), "{text}");
    let warnings: Vec<&String> = stream
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", stream.events);
    assert!(
        warnings[0].contains("OLLAMA_CONTEXT_LENGTH"),
        "{}",
        warnings[0]
    );
    let stored = host.stored_messages(&conversation).await;
    assert!(
        stored.iter().all(|m| !m.to_string().contains(CUT_ANSWER)),
        "the cut request's answer was not stored"
    );
    // Only the first request after the restart was over the window.
    assert_eq!(upstream.over_window(), 1);
}
