//! The scripted upstream's SSE events: one chunk, a tool call split across deltas, a text
//! answer in pieces; shared by every script of the upstream.

use axum::body::Bytes;
use serde_json::{json, Value};

/// The model name the host is configured with.
pub(crate) const MODEL: &str = "bench-model";

/// Argument text per tool-call delta.
const ARGS_PIECE: usize = 20;
/// Answer text per content delta.
pub(super) const TEXT_PIECE: usize = 12;

/// One Chat Completions SSE event: a chunk with this delta and finish reason.
pub(super) fn chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let body = json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_756_212_345,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {body}\n\n"))
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// One call in OpenAI's canonical shape: id and name first, arguments split across deltas.
pub(super) fn tool_call(id: &str, name: &str, args: &str) -> Vec<Bytes> {
    let mut events = vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
    ];
    for piece in pieces(args, ARGS_PIECE) {
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

/// A text answer in [`TEXT_PIECE`]s.
pub(super) fn text(answer: &str) -> Vec<Bytes> {
    text_in_pieces(answer, TEXT_PIECE)
}

/// A text answer, `piece` characters per content delta.
pub(super) fn text_in_pieces(answer: &str, piece: usize) -> Vec<Bytes> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in pieces(answer, piece) {
        events.push(chunk(json!({"content": piece}), None));
    }
    events.push(chunk(json!({}), Some("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}
