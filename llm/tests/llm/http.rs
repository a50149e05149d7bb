//! The client over real HTTP on loopback against `ScriptedUpstream`: request shape, every
//! fixture streamed in small chunks, retries (and the cases that must not retry), cuts,
//! idle timeout, cancellation by drop, and servers that ignore `"stream": true`.

use std::time::Duration;

use futures_util::StreamExt;
use rojos_llm::{
    ChatRequest, Client, Fault, LlmError, MessageText, Provider, Reach, SharedChatRequest,
    SizeLimit, ToolChoice, ToolDefinition, TurnEvent,
};
use serde_json::{json, Value};

use crate::support::expect::{check, drain, Outcome};
use crate::support::upstream::{End, Reply, ScriptedUpstream};

/// A provider for the upstream with fast retries.
fn provider(up: &ScriptedUpstream) -> Provider {
    let mut p = Provider::new(up.base_url(), "test-model").with_api_key("sk-test-key");
    p.retry.base_backoff = Duration::from_millis(1);
    p.retry.max_backoff = Duration::from_millis(5);
    p
}

static MESSAGES: std::sync::LazyLock<Vec<MessageText>> = std::sync::LazyLock::new(|| {
    vec![MessageText::new(
        &json!({"role": "user", "content": "make docs/intro"}),
    )]
});

fn request() -> ChatRequest<'static> {
    let tool = ToolDefinition::new(&json!({"type": "function", "function": {
        "name": "create_directory",
        "description": "Create a directory",
        "parameters": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {"path": {"type": "string", "minLength": 1}},
            "required": ["path"]
        }
    }}));
    ChatRequest {
        system: None,
        messages: &MESSAGES,
        tools: vec![tool.unwrap()],
        tool_choice: Some(ToolChoice::Auto),
    }
}

async fn turn(p: Provider) -> Outcome {
    let client = Client::new(p).unwrap();
    drain(client.stream_turn(&request())).await
}

const TEXT: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n";
const DONE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

fn ok_reply() -> Reply {
    Reply::sse(&format!("{TEXT}{DONE}"), End::Close)
}

#[tokio::test]
async fn request_streams_the_model_with_sanitised_tools_and_bearer_key() {
    let up = ScriptedUpstream::start(vec![ok_reply()]).await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.result.unwrap().text, "Hello world");
    up.assert_consumed();
    let requests = up.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], "Bearer sk-test-key");
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["accept"], "text/event-stream");
    let agent = r.headers["user-agent"].to_str().unwrap();
    assert!(agent.starts_with("rojos-llm/"), "{agent}");
    assert_eq!(
        r.body,
        json!({
            "model": "test-model",
            "stream": true,
            "messages": [{"role": "user", "content": "make docs/intro"}],
            "tools": [{"type": "function", "function": {
                "name": "create_directory",
                "description": "Create a directory",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }
            }}],
            "tool_choice": "auto"
        })
    );
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let up = ScriptedUpstream::start(vec![ok_reply()]).await;
    let mut p = provider(&up);
    p.api_key = None;
    p.headers.push(("X-Title".into(), "rojos".into()));
    turn(p).await.result.unwrap();
    let r = &up.requests()[0];
    assert!(r.headers.get("authorization").is_none());
    assert_eq!(r.headers["x-title"], "rojos");
}

#[tokio::test]
async fn every_fixture_streams_over_http_in_small_chunks_with_pauses() {
    for name in [
        "openai-single-call.sse",
        "openai-parallel-calls.sse",
        "openai-text-reply.sse",
        "openai-usage-chunk.sse",
        "midstream-error.sse",
        "gemini-compat-call.sse",
        "mistral-call.sse",
        "ollama-call.sse",
        "lmstudio-call.sse",
        "llamacpp-call.sse",
        "openrouter-keepalive-comments.sse",
        "no-arg-call.sse",
    ] {
        let up = ScriptedUpstream::start(vec![Reply::fixture(name, 97)]).await;
        let got = turn(provider(&up)).await;
        check(name, "over HTTP in 97-byte chunks", &got);
        // midstream-error fails after text was yielded: never retried.
        up.assert_consumed();
        assert_eq!(up.requests().len(), 1, "{name}");
    }
}

#[tokio::test]
async fn status_500_then_success_is_retried() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(
            500,
            "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}",
        ),
        ok_reply(),
    ])
    .await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.result.unwrap().text, "Hello world");
    up.assert_consumed();
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    // The body is written again for the retry (none is kept between attempts), the same.
    assert!(requests[0].body["messages"].is_array());
    assert_eq!(requests[1].body, requests[0].body);
}

#[tokio::test]
async fn a_shared_request_is_sent_as_the_borrowed_one_and_released_when_the_text_begins() {
    let up = ScriptedUpstream::start(vec![ok_reply(), ok_reply()]).await;
    let client = Client::new(provider(&up)).unwrap();
    let shared = SharedChatRequest::from(&request());
    let messages = std::sync::Arc::clone(&shared.messages);
    let mut stream = client.stream_shared(shared);
    // The stream shares the caller's messages (no copy) until nothing will be sent again.
    assert_eq!(std::sync::Arc::strong_count(&messages), 2);
    let first = stream.next().await;
    assert!(
        matches!(first, Some(Ok(TurnEvent::TextDelta(_)))),
        "{first:?}"
    );
    assert_eq!(
        std::sync::Arc::strong_count(&messages),
        1,
        "released at the first text"
    );
    drain(stream).await.result.unwrap();
    drain(client.stream_turn(&request())).await.result.unwrap();
    let requests = up.requests();
    assert_eq!(requests[0].body, requests[1].body);
}

#[tokio::test]
async fn status_429_honours_retry_after_instead_of_backoff() {
    for (header, value) in [("retry-after", "0"), ("retry-after-ms", "5")] {
        let up = ScriptedUpstream::start(vec![
            Reply::status(
                429,
                "{\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit_error\"}}",
            )
            .with_header(header, value),
            ok_reply(),
        ])
        .await;
        // A computed backoff would overshoot the turn deadline and give up; the provider's
        // short Retry-After must be used instead.
        let mut p = provider(&up);
        p.retry.base_backoff = Duration::from_secs(3600);
        p.retry.max_backoff = Duration::from_secs(3600);
        let got = turn(p).await;
        assert_eq!(got.result.unwrap().text, "Hello world", "{header}");
        up.assert_consumed();
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_turn_deadline_gives_up_at_once() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(429, "{\"error\":{\"message\":\"slow down\"}}")
            .with_header("retry-after", "100"),
        ok_reply(),
    ])
    .await;
    let mut p = provider(&up);
    p.timeouts.turn = Duration::from_secs(30);
    let err = turn(p).await.result.unwrap_err();
    assert_eq!(err.status_code(), Some(429));
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn x_should_retry_false_vetoes_a_retry() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(500, "boom").with_header("x-should-retry", "false"),
        ok_reply(),
    ])
    .await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert_eq!(err.status_code(), Some(500));
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn status_400_is_not_retried_and_carries_the_provider_message() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(400, "{\"error\":{\"message\":\"Invalid schema for function 'x'\",\"type\":\"invalid_request_error\"}}"),
        ok_reply(),
    ])
    .await;
    let got = turn(provider(&up)).await;
    let err = got.result.unwrap_err();
    assert_eq!(err.status_code(), Some(400));
    assert_eq!(
        err.to_string(),
        format!(
            "the model provider at {} answered HTTP 400: Invalid schema for function 'x'",
            up.host()
        )
    );
    assert!(!format!("{err:?}{err}").contains("sk-test-key"));
    assert_eq!(up.requests().len(), 1);
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn a_provider_echoing_the_key_or_a_url_key_never_puts_them_in_the_error() {
    // Gemini-style: the key in the URL's query, and an answer that quotes what it was sent.
    let up = ScriptedUpstream::start(vec![
        Reply::status(400, "{\"error\":{\"message\":\"API key AIza-url-secret-1 not valid; header said Bearer sk-test-key\"}}"),
        Reply::status(502, "proxy could not reach /v1/chat/completions?key=AIza-url-secret-1"),
    ])
    .await;
    let mut p = provider(&up);
    p.base_url = format!("{}?key=AIza-url-secret-1", up.base_url());
    p.retry.max_attempts = 1;
    for _ in 0..2 {
        let err = turn(p.clone()).await.result.unwrap_err();
        let shown = format!("{err:?}{err}");
        assert!(!shown.contains("AIza-url-secret-1"), "{shown}");
        assert!(!shown.contains("sk-test-key"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
    assert_eq!(up.requests().len(), 2);
    assert!(!format!("{p:?}").contains("AIza-url-secret-1"));
}

#[tokio::test]
async fn client_errors_are_never_retried() {
    for code in [401, 403, 404, 413, 422] {
        let up = ScriptedUpstream::start(vec![Reply::status(code, "nope"), ok_reply()]).await;
        let err = turn(provider(&up)).await.result.unwrap_err();
        assert_eq!(err.status_code(), Some(code));
        assert_eq!(up.requests().len(), 1, "{code}");
    }
}

#[tokio::test]
async fn quota_errors_are_not_retried_even_as_429() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(429, "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}"),
        ok_reply(),
    ])
    .await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert!(
        matches!(&err, LlmError::Status { code: 429, message, .. } if message == "You exceeded your current quota"),
        "{err:?}"
    );
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test]
async fn retries_stop_after_max_attempts() {
    let up = ScriptedUpstream::start(vec![
        Reply::status(503, "down"),
        Reply::status(529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
        Reply::status(502, "bad gateway"),
        ok_reply(),
    ])
    .await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert_eq!(err.status_code(), Some(502));
    assert_eq!(up.requests().len(), 3);
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn a_cut_after_text_is_not_retried_and_gives_stream_cut() {
    let up = ScriptedUpstream::start(vec![Reply::sse(TEXT, End::Cut), ok_reply()]).await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.deltas, ["Hello"]);
    assert!(
        matches!(got.result, Err(LlmError::StreamCut { .. })),
        "{:?}",
        got.result
    );
    assert_eq!(up.requests().len(), 1);
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn a_clean_eof_without_done_after_text_is_a_stream_cut() {
    let up = ScriptedUpstream::start(vec![Reply::sse(TEXT, End::Close), ok_reply()]).await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.deltas, ["Hello"]);
    assert!(
        matches!(got.result, Err(LlmError::StreamCut { source: None, .. })),
        "{:?}",
        got.result
    );
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn a_cut_before_any_output_is_retried() {
    let role_only = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    let up = ScriptedUpstream::start(vec![Reply::sse(role_only, End::Cut), ok_reply()]).await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.deltas, ["Hello", " world"]);
    assert_eq!(got.result.unwrap().text, "Hello world");
    up.assert_consumed();
}

#[tokio::test]
async fn a_transient_in_stream_error_before_output_is_retried() {
    let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let up = ScriptedUpstream::start(vec![Reply::sse(overloaded, End::Close), ok_reply()]).await;
    let got = turn(provider(&up)).await;
    assert_eq!(got.result.unwrap().text, "Hello world");
    up.assert_consumed();
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body, requests[0].body,
        "the retry sends the same request"
    );
}

#[tokio::test]
async fn a_non_transient_in_stream_error_is_reported_at_once() {
    let invalid = "data: {\"object\":\"error\",\"message\":\"context too long\",\"type\":\"BadRequestError\",\"code\":400}\n\n";
    let up = ScriptedUpstream::start(vec![Reply::sse(invalid, End::Close), ok_reply()]).await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the model provider at {} reported an error: context too long",
            up.host()
        )
    );
    assert_eq!(up.remaining(), 1);
}

#[tokio::test]
async fn keep_alive_comments_alone_hit_the_idle_timeout() {
    let up = ScriptedUpstream::start(vec![
        Reply::sse(
            ": OPENROUTER PROCESSING\n\n",
            End::KeepAlive {
                every: Duration::from_millis(20),
                count: 3000,
            },
        ),
        ok_reply(),
    ])
    .await;
    let mut p = provider(&up);
    p.timeouts.idle = Duration::from_millis(300);
    let err = turn(p).await.result.unwrap_err();
    assert!(matches!(err, LlmError::IdleTimeout { .. }), "{err:?}");
    assert_eq!(up.requests().len(), 1, "an idle timeout is not retried");
}

#[tokio::test]
async fn a_provider_silent_past_the_turn_deadline_is_a_turn_timeout_not_an_idle_one() {
    // It accepts the connection and never answers: the idle limit is far off, the turn's
    // deadline is what ends the wait for its headers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let mut p = Provider::new(format!("http://{address}/v1"), "test-model");
    p.timeouts.idle = Duration::from_secs(30);
    p.timeouts.turn = Duration::from_millis(400);
    let err = turn(p).await.result.unwrap_err();
    assert!(matches!(err, LlmError::TurnTimeout { .. }), "{err:?}");
    held.abort();
}

#[tokio::test]
async fn dropping_the_stream_drops_the_upstream_connection() {
    let up = ScriptedUpstream::start(vec![Reply::sse(
        TEXT,
        End::KeepAlive {
            every: Duration::from_millis(20),
            count: 3000,
        },
    )])
    .await;
    let client = Client::new(provider(&up)).unwrap();
    let mut stream = client.stream_turn(&request());
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, TurnEvent::TextDelta("Hello".into()));
    drop(stream);
    // Without the drop the upstream would stream keep-alives for a minute.
    tokio::time::timeout(Duration::from_secs(20), up.body_dropped())
        .await
        .expect("the upstream saw the client go away");
}

#[tokio::test]
async fn connect_errors_are_retried_then_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut p = Provider::new(format!("http://127.0.0.1:{port}/v1"), "m");
    p.retry.base_backoff = Duration::from_millis(1);
    let client = Client::new(p).unwrap();
    let err = drain(client.stream_turn(&request()))
        .await
        .result
        .unwrap_err();
    assert!(matches!(err, LlmError::Connect { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("could not reach the model provider at 127.0.0.1:{port}")
    );
    assert_eq!(err.fault(), Fault::Unreachable(Reach::Refused));
}

#[tokio::test]
async fn an_html_page_answered_with_200_is_not_a_chat_completions_endpoint() {
    let page = Reply::status(200, "<!DOCTYPE html><html><body>Welcome</body></html>")
        .with_header("content-type", "text/html; charset=utf-8");
    let up = ScriptedUpstream::start(vec![page, ok_reply()]).await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the model provider at {} sent a malformed stream: the answer is an HTML page \
             (content-type text/html), not a Chat Completions stream",
            up.host()
        )
    );
    assert_eq!(err.fault(), Fault::NotCompatible);
    assert_eq!(up.remaining(), 1, "not retried");
}

#[tokio::test]
async fn an_older_llama_cpp_error_line_is_reported_with_its_message_not_as_an_empty_turn() {
    // llama.cpp's server before its late-2025 rewrite: an `error:` line, then `[DONE]`.
    let old = "error: {\"code\":400,\"message\":\"the request exceeds the available context \
               size. try increasing the context size or enable context shift\",\"type\":\
               \"invalid_request_error\"}\n\ndata: [DONE]\n\n";
    let up = ScriptedUpstream::start(vec![Reply::sse(old, End::Close)]).await;
    let err = turn(provider(&up)).await.result.unwrap_err();
    assert!(
        matches!(&err, LlmError::Provider { message, .. }
            if message.contains("exceeds the available context size")),
        "{err:?}"
    );
    assert_eq!(err.fault(), Fault::ContextTooLong);
    up.assert_consumed();
    assert_eq!(
        up.requests().len(),
        1,
        "a provider's error is not retried as empty"
    );
}

#[tokio::test]
async fn an_empty_stream_is_retried_once_then_reported_with_what_came() {
    let empty = "data: {\"choices\":[]}\n\ndata: {\"choices\":[]}\n\ndata: [DONE]\n\n";
    let up = ScriptedUpstream::start(vec![
        Reply::sse(empty, End::Close),
        Reply::sse(empty, End::Close),
    ])
    .await;
    let mut p = provider(&up);
    p.retry.max_attempts = 2;
    let err = turn(p).await.result.unwrap_err();
    assert!(
        matches!(&err, LlmError::EmptyTurn { received, .. } if received == "2 chunks with no choices, then [DONE]"),
        "{err:?}"
    );
    assert_eq!(err.fault(), Fault::EmptyTurn);
    up.assert_consumed();
}

#[tokio::test]
async fn an_empty_json_answer_is_an_empty_turn() {
    let up = ScriptedUpstream::start(vec![Reply::Json(
        json!({"object": "chat.completion", "choices": []}),
    )])
    .await;
    let mut p = provider(&up);
    p.retry.max_attempts = 1;
    let err = turn(p).await.result.unwrap_err();
    assert!(
        matches!(&err, LlmError::EmptyTurn { received, .. } if received == "a JSON answer with no choices"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_accepted() {
    let completion = json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "create_directory", "arguments": "{\"path\":\"docs\"}"}}]
        }}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    });
    let up = ScriptedUpstream::start(vec![Reply::Json(completion)]).await;
    let t = turn(provider(&up)).await.result.unwrap();
    assert_eq!(t.tool_calls.len(), 1);
    assert_eq!(t.tool_calls[0].id, "call_1");
    assert_eq!(
        t.tool_calls[0].arguments.clone().map(Value::Object),
        Ok(json!({"path": "docs"}))
    );
    assert_eq!(t.usage.map(|u| u.total_tokens), Some(8));
}

#[tokio::test]
async fn a_json_answer_over_the_event_cap_is_too_large_and_not_retried() {
    let completion = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "x".repeat(80_000)}}]});
    let up = ScriptedUpstream::start(vec![Reply::Json(completion)]).await;
    let mut p = provider(&up);
    p.limits.max_turn_bytes = 4096; // an event cap of 8 KiB + 64 KiB
    let err = turn(p).await.result.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::TooLarge {
                limit: SizeLimit::Event {
                    max_bytes: 73_728,
                    max_turn_bytes: 4096
                },
                ..
            }
        ),
        "{err:?}"
    );
    up.assert_consumed();
}

#[tokio::test]
async fn a_json_answer_of_exactly_the_event_cap_is_read_whole() {
    let answer = |pad: &str| {
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}], "padding": pad})
    };
    let cap = 73_728; // max_turn_bytes 4096: 8 KiB + 64 KiB
    let pad = "p".repeat(cap - answer("").to_string().len());
    let completion = answer(&pad);
    assert_eq!(completion.to_string().len(), cap);
    let up = ScriptedUpstream::start(vec![Reply::Json(completion)]).await;
    let mut p = provider(&up);
    p.limits.max_turn_bytes = 4096;
    assert_eq!(turn(p).await.result.unwrap().text, "ok");
}

#[tokio::test]
async fn a_json_answer_past_the_turn_limit_is_too_large() {
    let completion = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "x".repeat(5000)}}]});
    let up = ScriptedUpstream::start(vec![Reply::Json(completion)]).await;
    let mut p = provider(&up);
    p.limits.max_turn_bytes = 4096;
    let got = turn(p).await;
    assert!(got.deltas.is_empty(), "{:?}", got.deltas);
    let err = got.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the model's turn exceeded 4096 bytes of text and tool calls; ask for a shorter \
         answer or for the work in smaller steps, or raise the limit"
    );
}

#[test]
fn an_invalid_tool_name_is_refused_before_it_can_be_offered() {
    let err = ToolDefinition::new(&json!({"type": "function", "function": {"name": "bad name"}}))
        .unwrap_err();
    assert!(matches!(err, LlmError::InvalidRequest { .. }), "{err:?}");
}

#[tokio::test]
async fn the_assistant_message_round_trips_the_gemini_signature() {
    let up = ScriptedUpstream::start(vec![Reply::fixture("gemini-compat-call.sse", 50)]).await;
    let mut p = provider(&up);
    p.empty_content = rojos_llm::EmptyContent::EmptyString;
    let client = Client::new(p).unwrap();
    let t = drain(client.stream_turn(&request())).await.result.unwrap();
    let msg = client.assistant_message(&t);
    assert_eq!(msg["content"], "");
    assert_eq!(msg["tool_calls"][0]["id"], "call_4817302");
    assert_eq!(
        msg["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"docs/intro\"}"
    );
    assert!(msg["tool_calls"][0]["extra_content"]["google"]["thought_signature"].is_string());
}

#[tokio::test]
async fn a_client_for_the_model_list_sends_no_turn_without_a_model() {
    let up = ScriptedUpstream::start(vec![]).await;
    let mut p = provider(&up);
    p.model = String::new();
    let client = Client::for_model_list(p).unwrap();
    let debug = format!("{client:?}");
    assert!(
        debug.starts_with("Client {") && !debug.contains("sk-test-key"),
        "{debug}"
    );
    let got = drain(client.stream_turn(&request())).await;
    let error = got.result.unwrap_err();
    assert!(
        matches!(&error, LlmError::InvalidRequest { detail } if detail.starts_with("no model chosen for")),
        "{error}"
    );
    assert!(up.requests().is_empty(), "nothing was sent");
}
