//! The project's copy of the provider fixtures and `expected.json`, and one checker that
//! compares what the client extracted with what the table says, naming the fixture.

use std::path::PathBuf;
use std::sync::OnceLock;

use futures_util::StreamExt;
use rojos_llm::{FinishReason, LlmError, Turn, TurnEvent, TurnStream};
use serde_json::Value;

/// Where the fixtures live.
pub(crate) fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers")
}

/// A fixture's bytes.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `expected.json`'s entry for a fixture.
pub(crate) fn expected(name: &str) -> &'static Value {
    static TABLE: OnceLock<Value> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        serde_json::from_slice(&fixture("expected.json")).expect("expected.json is JSON")
    });
    table["cases"]
        .get(name)
        .unwrap_or_else(|| panic!("expected.json has no case {name}"))
}

/// Everything a turn stream produced.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) deltas: Vec<String>,
    pub(crate) result: Result<Turn, LlmError>,
    /// Items after the first error or `Finished` (must be none).
    pub(crate) trailing: usize,
}

/// Drains a stream.
pub(crate) async fn drain(mut stream: TurnStream) -> Outcome {
    let mut deltas = Vec::new();
    let mut result = None;
    let mut trailing = 0;
    while let Some(item) = stream.next().await {
        if result.is_some() {
            trailing += 1;
            continue;
        }
        match item {
            Ok(TurnEvent::TextDelta(t)) => deltas.push(t),
            Ok(TurnEvent::ToolCallStarted { .. } | TurnEvent::ToolCallProgress { .. }) => {}
            Ok(TurnEvent::Finished(turn)) => result = Some(Ok(turn)),
            Err(e) => result = Some(Err(e)),
        }
    }
    let result = result
        .unwrap_or_else(|| panic!("stream ended without Finished or error; deltas {deltas:?}"));
    Outcome {
        deltas,
        result,
        trailing,
    }
}

fn finish_name(f: &FinishReason) -> String {
    match f {
        FinishReason::Stop => "stop".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(o) => o.clone(),
    }
}

fn is_minted(id: &str) -> bool {
    id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Compares an outcome with `expected.json`; `how` names the variant (split, line ending).
pub(crate) fn check(name: &str, how: &str, got: &Outcome) {
    let want = expected(name);
    let ctx = format!("{name} ({how})");
    assert_eq!(got.trailing, 0, "{ctx}: items after the end");
    let text: String = got.deltas.concat();
    assert_eq!(text, want["text"].as_str().unwrap(), "{ctx}: streamed text");
    if want["outcome"] == "error" {
        let want_err = &want["error"];
        match &got.result {
            Err(LlmError::Provider { message, code, .. }) => {
                assert_eq!(
                    message,
                    want_err["message"].as_str().unwrap(),
                    "{ctx}: message"
                );
                assert_eq!(code.as_deref(), want_err["code"].as_str(), "{ctx}: code");
            }
            other => panic!("{ctx}: expected a provider error, got {other:?}"),
        }
        return;
    }
    let turn = match &got.result {
        Ok(turn) => turn,
        Err(e) => panic!("{ctx}: expected a turn, got error {e:?}"),
    };
    assert_eq!(
        turn.text, text,
        "{ctx}: turn text is the deltas' concatenation"
    );
    assert_eq!(
        finish_name(&turn.finish_reason),
        want["finish_reason"].as_str().unwrap(),
        "{ctx}: finish_reason"
    );
    assert_eq!(
        turn.finish_reason_raw.as_deref(),
        want["finish_reason_raw"].as_str(),
        "{ctx}: raw finish_reason"
    );
    let usage = turn
        .usage
        .map(|u| serde_json::to_value(u).unwrap())
        .unwrap_or(Value::Null);
    assert_eq!(usage, want["usage"], "{ctx}: usage");
    let want_calls = want["tool_calls"].as_array().unwrap();
    assert_eq!(
        turn.tool_calls.len(),
        want_calls.len(),
        "{ctx}: number of calls: {:?}",
        turn.tool_calls
    );
    for (i, (call, w)) in turn.tool_calls.iter().zip(want_calls).enumerate() {
        assert_eq!(
            call.name,
            w["name"].as_str().unwrap(),
            "{ctx}: call {i} name"
        );
        let args = call.arguments.clone().map(Value::Object);
        assert_eq!(
            args,
            Ok(w["arguments"].clone()),
            "{ctx}: call {i} arguments"
        );
        match w["id"].as_str() {
            Some(id) if w.get("id_synthesized") != Some(&Value::Bool(true)) => {
                assert_eq!(call.id, id, "{ctx}: call {i} id")
            }
            _ => assert!(
                is_minted(&call.id),
                "{ctx}: call {i} minted id {:?}",
                call.id
            ),
        }
        match w.get("extra_content") {
            Some(extra) => assert_eq!(
                call.extra.as_ref().and_then(|e| e.get("extra_content")),
                Some(extra),
                "{ctx}: call {i} extra_content"
            ),
            None => assert_eq!(call.extra, None, "{ctx}: call {i} extra"),
        }
    }
}
