//! Every shared provider fixture (real providers' SSE bytes) served by the scripted upstream
//! through `POST /chat`, whole and split at arbitrary byte positions: the client sees what
//! `expected.json` says a correct client extracts, and the calls run.
//! See: llm/tests/fixtures/providers/expected.json.

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::Stream,
    upstream::{fixture_text, ScriptedUpstream, Turn},
};

/// Byte counts per write: whole events, then splits that fall anywhere (mid-line, mid-UTF-8).
const SPLITS: [Option<usize>; 4] = [None, Some(1), Some(7), Some(61)];

fn expected(fixture: &str) -> Value {
    let all: Value = serde_json::from_str(&fixture_text("expected.json")).expect("expected.json");
    all["cases"][fixture].clone()
}

async fn check_fixture(fixture: &str) {
    let case = expected(fixture);
    for split in SPLITS {
        let mut turn = Turn::fixture(fixture);
        if let Some(n) = split {
            turn = turn.split_every(n);
        }
        let mut turns = vec![turn];
        if case["outcome"] == "tool_calls" {
            turns.push(Turn::text("ok"));
        }
        let upstream = ScriptedUpstream::start(turns).await;
        let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
        let stream = Stream::read(
            host.chat(json!({"projectId": "demo", "message": "go"}))
                .await,
        )
        .await;
        let context = format!("{fixture} split {split:?}: {stream:#?}");

        let calls = stream.calls();
        let expected_calls = case["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), expected_calls.len(), "{context}");
        for ((name, args), want) in calls.iter().zip(expected_calls) {
            assert_eq!(name, want["name"].as_str().unwrap(), "{context}");
            assert_eq!(args, &want["arguments"], "{context}");
        }
        let ids: Vec<String> = stream
            .events
            .iter()
            .filter_map(|e| match e {
                crate::support::ndjson::Event::ToolCall { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        for (id, want) in ids.iter().zip(expected_calls) {
            match want["id"].as_str() {
                Some(want_id) if !want_id.is_empty() => assert_eq!(id, want_id, "{context}"),
                _ => assert!(
                    id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()),
                    "minted id {id}: {context}"
                ),
            }
        }
        match case["outcome"].as_str().unwrap() {
            "error" => {
                assert_eq!(
                    stream.text(),
                    case["text"].as_str().unwrap(),
                    "partial text kept: {context}"
                );
                let message = case["error"]["message"].as_str().unwrap();
                assert!(
                    stream.errors().iter().any(|e| e.contains(message)),
                    "{context}"
                );
                assert_eq!(stream.done().1, "provider_error", "{context}");
            }
            "text" => {
                assert_eq!(stream.text(), case["text"].as_str().unwrap(), "{context}");
                assert_eq!(stream.done().1, "completed", "{context}");
            }
            _ => {
                assert_eq!(
                    stream.text(),
                    format!("{}ok", case["text"].as_str().unwrap()),
                    "{context}"
                );
                assert_eq!(stream.done().1, "completed", "{context}");
                // Each call got exactly one tool message, same id, same order, and the
                // assistant message echoes the calls with valid JSON object arguments.
                let second = &upstream.received()[1].body["messages"];
                let assistant = &second[1];
                for (i, id) in ids.iter().enumerate() {
                    assert_eq!(assistant["tool_calls"][i]["id"], id.as_str(), "{context}");
                    let arguments = assistant["tool_calls"][i]["function"]["arguments"]
                        .as_str()
                        .unwrap();
                    assert!(
                        serde_json::from_str::<Value>(arguments)
                            .unwrap()
                            .is_object(),
                        "{context}"
                    );
                    assert_eq!(second[2 + i]["role"], "tool", "{context}");
                    assert_eq!(second[2 + i]["tool_call_id"], id.as_str(), "{context}");
                }
            }
        }
        upstream.assert_consumed();
    }
}

macro_rules! fixture_tests {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                check_fixture($file).await;
            }
        )*
    };
}

fixture_tests! {
    openai_single_call => "openai-single-call.sse",
    openai_parallel_calls => "openai-parallel-calls.sse",
    openai_text_reply => "openai-text-reply.sse",
    openai_usage_chunk => "openai-usage-chunk.sse",
    midstream_error => "midstream-error.sse",
    gemini_compat_call => "gemini-compat-call.sse",
    mistral_call => "mistral-call.sse",
    ollama_call => "ollama-call.sse",
    lmstudio_call => "lmstudio-call.sse",
    llamacpp_call => "llamacpp-call.sse",
    openrouter_keepalive_comments => "openrouter-keepalive-comments.sse",
    no_arg_call => "no-arg-call.sse",
}
