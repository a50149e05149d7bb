//! Each class of provider failure, as the real `rojos` binary tells it: the scripted upstream
//! answers in a real provider's error shape (or nothing listens, or the stream is empty), the
//! chat's only `ERROR` is the one sentence saying what failed and what to do, the log carries
//! the technical detail (with the provider's name) that the sentence leaves out, and the
//! server goes on serving. See docs/api.md, "ERROR".

use serde_json::json;

use crate::support::{
    binary::RunningBinary,
    host::{client, HostConfig, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// The real binary serving a `default` rojo whose only provider is `provider_table`.
struct Served {
    rojos: RunningBinary,
    url: String,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(provider_table: &str, env: &[(&str, &str)]) -> Served {
        Served::start_with(provider_table, "", env)
    }

    /// As [`Served::start`], with `rojo_lines` added to the `default` rojo's table.
    fn start_with(provider_table: &str, rojo_lines: &str, env: &[(&str, &str)]) -> Served {
        let name = provider_table
            .trim_start()
            .strip_prefix("[providers.")
            .and_then(|rest| rest.split(']').next())
            .expect("a [providers.NAME] table");
        let config = HostConfig::builtins().with(&format!(
            "{provider_table}\n[rojos.default]\nprovider = \"{name}\"\ntools = \"*\"\n{rojo_lines}"
        ));
        let dir = config.in_temp_folder();
        let rojos = RunningBinary::start(dir.path(), "info", env);
        let url = rojos.url();
        Served {
            rojos,
            url,
            _dir: dir,
        }
    }

    async fn chat(&self, message: &str) -> Stream {
        let response = client()
            .post(format!("{}/chat", self.url))
            .bearer_auth(TOKEN)
            .json(&json!({"projectId": "demo", "message": message}))
            .send()
            .await
            .expect("the chat reaches rojos");
        Stream::read(response).await
    }

    /// Checks that a chat fails with exactly `sentence`, that the log line of the failure
    /// names `provider` and holds `detail`, which the sentence does not; returns the
    /// conversation.
    async fn fails_with(&self, sentence: &str, provider: &str, detail: &str) -> String {
        let stream = self.chat("hi").await;
        assert_eq!(stream.errors(), [sentence], "{stream:#?}");
        let (conversation, stop) = stream.done();
        assert_eq!(stop, "provider_error");
        assert!(
            !sentence.contains(detail) && !sentence.contains("the model provider at"),
            "the technical detail stays out of the event: {sentence}"
        );
        let log = without_colours(&RunningBinary::wait_for(
            &self.rojos.stderr,
            detail,
            "the technical detail",
        ));
        assert!(
            log.lines().any(|line| line.contains("model turn failed")
                && line.contains(&format!("provider={provider}"))
                && line.contains(detail)),
            "the failure's log line names the provider and holds the detail:\n{log}"
        );
        conversation
    }

    /// A further chat is answered.
    async fn still_serves(&self, upstream: &ScriptedUpstream) {
        upstream.push([Turn::text("still here")]);
        let next = self.chat("again").await;
        assert_eq!(next.text(), "still here");
        assert_eq!(next.done().1, "completed");
        upstream.assert_consumed();
    }
}

/// `text` without ANSI colour sequences (`ESC [ … m`), whether or not the log has them.
fn without_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}

fn table(name: &str, kind: &str, base_url: &str, model: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n\
         max_attempts = 1\n"
    )
}

const OPENAI_KEY: [(&str, &str); 1] = [("OPENAI_API_KEY", "sk-e2e-openai")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_says_the_key_in_its_variable_was_refused() {
    let upstream = ScriptedUpstream::start(vec![Turn::error_body(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-e2e-***enai. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    )])
    .await;
    let served = Served::start(
        &table("openai", "openai", &upstream.base_url, "gpt-4.1-mini"),
        &OPENAI_KEY,
    );
    let sentence = "OpenAI refused the API key in OPENAI_API_KEY: check the key, or set another \
                    provider in rojos.toml";
    let conversation = served
        .fails_with(
            sentence,
            "openai",
            "answered HTTP 401: Incorrect API key provided",
        )
        .await;
    // The stored history closes the turn with the same sentence.
    let stored: Vec<serde_json::Value> = client()
        .get(format!("{}/conversations/{conversation}", served.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the history")
        .json()
        .await
        .expect("a page of messages");
    assert_eq!(stored[1]["content"], format!("(no answer: {sentence})"));
    served.still_serves(&upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_for_the_model_says_to_set_one_the_provider_offers() {
    let upstream = ScriptedUpstream::start(vec![Turn::error_body(
        404,
        r#"{"error":{"message":"The model `gpt-5-mini` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
    )])
    .await;
    let served = Served::start(
        &table("openai", "openai", &upstream.base_url, "gpt-5-mini"),
        &OPENAI_KEY,
    );
    served
        .fails_with(
            "OpenAI has no model gpt-5-mini: set `model` in [providers.openai] to one it offers",
            "openai",
            "answered HTTP 404: The model `gpt-5-mini` does not exist",
        )
        .await;
    served.still_serves(&upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_says_to_wait_and_send_again() {
    let upstream = ScriptedUpstream::start(vec![Turn::error_body(
        429,
        r#"{"error":{"message":"Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_e2e` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Used 11000, Requested 2000. Please try again in 5s.","type":"tokens","code":"rate_limit_exceeded"}}"#,
    )
    .header("retry-after", "0")])
    .await;
    let served = Served::start(
        &table(
            "groq",
            "groq",
            &upstream.base_url,
            "llama-3.3-70b-versatile",
        ),
        &[("GROQ_API_KEY", "gsk-e2e")],
    );
    served
        .fails_with(
            "Groq is rate limiting requests: wait a minute and send the message again",
            "groq",
            "answered HTTP 429: Rate limit reached for model",
        )
        .await;
    assert_eq!(upstream.received().len(), 1, "max_attempts = 1");
    served.still_serves(&upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_for_the_context_length_says_to_start_a_new_conversation_when_compaction_is_off() {
    let upstream = ScriptedUpstream::start(vec![Turn::error_body(
        400,
        r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33012 tokens (33012 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
    )])
    .await;
    // With compaction on, the host fits the request again and retries instead (see the
    // `context` tests); a rojo with `compact_at_percent = 0` keeps the error.
    let served = Served::start_with(
        &table(
            "vllm",
            "vllm",
            &upstream.base_url,
            "Qwen/Qwen2.5-7B-Instruct",
        ),
        "compact_at_percent = 0\n",
        &[],
    );
    served
        .fails_with(
            "The conversation is too long for Qwen/Qwen2.5-7B-Instruct's context: start a new \
             conversation",
            "vllm",
            "answered HTTP 400: This model's maximum context length is 32768 tokens",
        )
        .await;
    served.still_serves(&upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_a_503_saying_the_local_server_is_not_running_and_how_to_start_it()
{
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let served = Served::start(
        &table(
            "ollama",
            "ollama",
            &format!("http://127.0.0.1:{port}/v1"),
            "qwen2.5:7b",
        ),
        &[],
    );
    let sentence = format!(
        "Ollama is not running at 127.0.0.1:{port}: start it with `ollama serve` and pull a \
         model with tool support (`ollama pull qwen2.5:7b`), or set another provider in \
         rojos.toml"
    );
    // The background check finds it down first: the chat is refused before any conversation
    // is made, with the sentence a failed turn would carry, and the log keeps the detail.
    for _ in 0..2 {
        let response = client()
            .post(format!("{}/chat", served.url))
            .bearer_auth(TOKEN)
            .json(&json!({"projectId": "demo", "message": "hi"}))
            .send()
            .await
            .expect("the chat reaches rojos");
        assert_eq!(response.status(), 503);
        let body: serde_json::Value = response.json().await.expect("a JSON error");
        assert_eq!(body["error"], sentence.as_str());
    }
    let log = without_colours(&RunningBinary::wait_for(
        &served.rojos.stderr,
        "Connection refused",
        "the technical detail",
    ));
    assert!(
        log.lines()
            .any(|line| line.contains("provider ollama is unavailable")
                && line.contains("Connection refused")),
        "the check's log line names the provider and holds the detail:\n{log}"
    );
    let listed: Vec<serde_json::Value> = client()
        .get(format!("{}/conversations?projectId=demo", served.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the list")
        .json()
        .await
        .expect("a list");
    assert!(listed.is_empty(), "no conversation was made: {listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_stream_is_a_provider_error_saying_what_was_received() {
    let usage_only = "data: {\"id\":\"chatcmpl-e2e\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":0,\"total_tokens\":12}}\n\n";
    let upstream = ScriptedUpstream::start(vec![Turn::events(&[
        usage_only,
        usage_only,
        usage_only,
        "data: [DONE]\n\n",
    ])])
    .await;
    let served = Served::start(
        &table(
            "lmstudio",
            "lmstudio",
            &upstream.base_url,
            "qwen2.5-7b-instruct",
        ),
        &[],
    );
    served
        .fails_with(
            "LM Studio ended the turn without an answer (3 chunks with no choices, then \
             [DONE]): send the message again, or set another `model` in [providers.lmstudio]",
            "lmstudio",
            "ended the turn without text, tool calls or a finish reason",
        )
        .await;
    served.still_serves(&upstream).await;
}
