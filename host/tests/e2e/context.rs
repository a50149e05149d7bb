//! Long conversations never hit the wall: against an upstream that enforces an 8,192-token
//! window and answers a bigger request as the provider does, a conversation in which every
//! message reads a 6 KB note goes on for 100 stored messages. Older tool results are
//! shortened and older turns summarised (once per compaction, the summary reused by later
//! turns and by a restarted host); no request is ever over the window, no tool call is sent
//! without its result, and the stored history keeps every message. A provider's own
//! overflow error (OpenAI's, llama.cpp's) makes the host fit the request again and retry.
//! A new conversation's first message is fitted as every later one: a paste larger than the
//! window is cut to fit before it is sent, and an Ollama that cuts the first request
//! silently has it fitted and asked again.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::{Event, Stream},
    overflow::{self, Overflow},
    server_info::ollama_show,
    upstream::{ScriptedUpstream, Turn, CUT_ANSWER},
};

/// The window the upstream enforces, in tokens of four bytes.
const WINDOW: usize = 8_192;

async fn windowed(overflow: Overflow) -> ScriptedUpstream {
    ScriptedUpstream::start_windowed(
        WINDOW,
        (overflow.status, overflow.body),
        Turn::tool_calls(&[("call_read", "get_text_content", json!({"path": "note.txt"}))]),
        Turn::text("It is a note about kettles."),
    )
    .await
}

/// A host whose `default` rojo is told the model's window is `tokens`.
fn config(upstream: &ScriptedUpstream, tokens: usize) -> HostConfig {
    HostConfig::builtins().upstream(upstream).with(&format!(
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\ncontext_tokens = {tokens}\n"
    ))
}

fn seed_note(host: &TestHost) {
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    let note: String = (0..160)
        .map(|n| format!("Line {n:03}: kettles boil water for tea.\n"))
        .collect();
    assert!(note.len() > 5_000);
    std::fs::write(root.join("note.txt"), note).unwrap();
}

/// Sends message `n` and checks it completed with the tool's result.
async fn ask(host: &TestHost, conversation: Option<&str>, n: usize) -> Stream {
    let mut body =
        json!({"projectId": "demo", "message": format!("Message {n}: what is note.txt about?")});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let stream = Stream::read(host.chat(body).await).await;
    assert_eq!(stream.errors(), Vec::<String>::new(), "message {n}");
    assert_eq!(stream.done().1, "completed", "message {n}");
    assert!(stream.results()[0].1, "message {n}: the note was read");
    stream
}

fn compactions(stream: &Stream) -> Vec<(u64, String)> {
    stream
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCompacted { covers, summary } => Some((*covers, summary.clone())),
            _ => None,
        })
        .collect()
}

/// Every `tool` message of a request follows the assistant message that made its call.
fn calls_kept_with_results(body: &Value) {
    let mut open = HashSet::new();
    for message in body["messages"].as_array().unwrap() {
        match message["role"].as_str() {
            Some("assistant") => {
                open.clear();
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    open.insert(call["id"].as_str().unwrap().to_owned());
                }
            }
            Some("tool") => assert!(
                open.contains(message["tool_call_id"].as_str().unwrap()),
                "a tool result sent without its call: {message}"
            ),
            _ => open.clear(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_message_conversation_reading_large_notes_fits_the_window_throughout() {
    let upstream = windowed(overflow::OPENAI).await;
    let config = config(&upstream, WINDOW);
    let mut host = TestHost::start(config.clone()).await;
    seed_note(&host);
    let first = ask(&host, None, 0).await;
    let conversation = first.done().0;
    let mut seen = Vec::new();
    for n in 1..25 {
        if n == 12 {
            // A restart in the middle: the summary kept is read back, not made again.
            let summaries = upstream.summaries();
            host = host.restart(config.clone()).await;
            let stream = ask(&host, Some(&conversation), n).await;
            assert!(compactions(&stream).len() <= 1);
            let after = upstream.received();
            let system = after
                .iter()
                .rev()
                .find(|r| r.body["tools"].is_array())
                .map(|r| {
                    r.body["messages"][0]["content"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .unwrap();
            assert!(
                system.contains("Summary "),
                "the first turn after the restart sends the kept summary: {system:.200}"
            );
            seen.extend(compactions(&stream));
            assert!(upstream.summaries() <= summaries + 1);
            continue;
        }
        let before = upstream.summaries();
        let stream = ask(&host, Some(&conversation), n).await;
        let made = compactions(&stream);
        // A summary is asked for only by a turn that compacts, once: later turns reuse it.
        assert_eq!(
            made.len(),
            usize::from(upstream.summaries() > before),
            "message {n}"
        );
        seen.extend(made);
    }

    assert_eq!(upstream.over_window(), 0, "no request was over the window");
    assert!(!seen.is_empty(), "the conversation was compacted");

    let covers: Vec<u64> = seen.iter().map(|(c, _)| *c).collect();
    assert!(covers.windows(2).all(|w| w[0] < w[1]), "{covers:?}");
    for request in upstream.received() {
        calls_kept_with_results(&request.body);
    }
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(stored.len(), 100, "every message is stored");
    assert!(stored.iter().all(|m| m["role"] != "system"));
    // The summary travels in the system message, with the newest turns word for word.
    let last = upstream.received().last().unwrap().body.clone();
    assert!(last["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Summary "));
    let sent = last["messages"].as_array().unwrap();
    assert!(sent.len() < 40, "older turns are summarised, not sent");
    assert_eq!(sent.last().unwrap()["role"], "tool");
    assert!(sent.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .contains("Line 159"));
}

/// A host told a window four times the real one: each request past the real window gets
/// `overflow`; the host fits the request again and retries, and every message is answered.
async fn overflow_is_refitted(overflow: Overflow) {
    let upstream = windowed(overflow).await;
    let host = TestHost::start(config(&upstream, WINDOW * 4)).await;
    seed_note(&host);
    let conversation = ask(&host, None, 0).await.done().0;
    for n in 1..8 {
        ask(&host, Some(&conversation), n).await;
    }
    let largest = upstream
        .received()
        .iter()
        .map(|r| r.body.to_string().len())
        .max();
    assert!(
        upstream.over_window() > 0,
        "{}: the window was never overrun (largest request {largest:?} bytes)",
        overflow.family
    );
    assert_eq!(host.stored_messages(&conversation).await.len(), 32);
}

/// One test per provider family's overflow answer (`support::overflow`).
macro_rules! overflow_tests {
    ($($name:ident => $overflow:expr,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            overflow_is_refitted($overflow).await;
        }
    )*};
}

overflow_tests! {
    an_openai_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::OPENAI,
    an_anthropic_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::ANTHROPIC,
    a_gemini_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::GEMINI,
    a_mistral_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::MISTRAL,
    a_vllm_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::VLLM,
    a_vllm_engine_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::VLLM_ENGINE,
    a_llamacpp_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::LLAMACPP,
    an_older_llamacpp_streamed_error_field_makes_the_host_fit_the_request_and_retry =>
        overflow::LLAMACPP_OLD_STREAM,
    an_ollama_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::OLLAMA,
    an_lmstudio_overflow_error_makes_the_host_fit_the_request_and_retry => overflow::LMSTUDIO,
    an_lmstudio_mlx_overflow_error_makes_the_host_fit_the_request_and_retry =>
        overflow::LMSTUDIO_MLX,
    an_lmstudio_streamed_overflow_error_makes_the_host_fit_the_request_and_retry =>
        overflow::LMSTUDIO_STREAM,
}

/// `lines` lines of pasted text, about 60 bytes each.
fn pasted(lines: usize) -> String {
    (0..lines)
        .map(|n| format!("Pasted line {n:04}: the kettle whistles when the water boils.\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_larger_than_the_window_is_cut_to_fit_before_it_is_sent() {
    let upstream = windowed(overflow::OPENAI).await;
    let host = TestHost::start(config(&upstream, WINDOW)).await;
    seed_note(&host);
    // About 60 KB: twice what the window holds.
    let message = format!(
        "What is note.txt about? Here is what I have:\n{}",
        pasted(1_000)
    );
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": message}))
            .await,
    )
    .await;
    assert_eq!(stream.errors(), Vec::<String>::new());
    assert_eq!(stream.done().1, "completed");
    assert_eq!(
        upstream.over_window(),
        0,
        "the first request was fitted to the window, not refused by the provider"
    );
    let first = &upstream.received()[0].body;
    let sent = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        sent.contains("Rojos cut this to fit the model's context window"),
        "the pasted message was cut with a marker: {:.200}",
        &sent[sent.len().saturating_sub(300)..]
    );
    // The stored history keeps the message whole.
    let stored = host.stored_messages(&stream.done().0).await;
    assert_eq!(stored[0]["content"], json!(message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_that_cuts_the_first_request_silently_gets_it_fitted_and_asked_again() {
    // It loads the model with a window of 1,200 tokens, which nothing says before the first
    // request: the host plans for Ollama's default.
    let upstream = ScriptedUpstream::start_ollama(
        "qwen2.5:7b",
        ollama_show(None),
        1_200,
        Turn::tool_calls(&[("call_read", "get_text_content", json!({"path": "note.txt"}))]),
        Turn::text("It is a note about kettles."),
    )
    .await;
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "[rojos.default]\nprovider = \"ollama\"\ntools = [\"get_text_content\"]\n\
         [providers.ollama]\nkind = \"ollama\"\nbase_url = \"{}\"\nmodel = \"qwen2.5:7b\"\n",
        upstream.base_url
    ));
    let host = TestHost::start(config).await;
    seed_note(&host);
    // About 5.5 KB: within the window planned for, far over the one loaded.
    let message = format!(
        "What is note.txt about? Here is what I have:\n{}",
        pasted(90)
    );
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": message}))
            .await,
    )
    .await;
    assert_eq!(stream.errors(), Vec::<String>::new());
    assert_eq!(stream.done().1, "completed");
    assert!(
        upstream.over_window() >= 1,
        "the first request was cut by the provider"
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
    let warned = stream
        .events
        .iter()
        .any(|e| matches!(e, Event::Warning { message } if message.contains("without an error")));
    assert!(warned, "the cut was told: {:?}", stream.events);
    let stored = host.stored_messages(&stream.done().0).await;
    assert!(
        stored.iter().all(|m| !m.to_string().contains(CUT_ANSWER)),
        "the cut request's answer was not stored"
    );
}
