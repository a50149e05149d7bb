//! The first-use upstream (`/first-use/v1`), for the idle memory: its first turn calls every
//! tool the request offers once (all in one turn, each call whole in one delta), with
//! arguments each built-in tool accepts; once the request carries tool results, a short text
//! answer. With no tool offered it answers at once. A call may fail (a missing file): the
//! plugin's code has run either way, which is what the measurement needs.

use axum::body::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::chunks::{chunk, text};

/// The part of a request that picks the turn.
#[derive(Debug, Deserialize)]
struct Request {
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<Offered>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
}

#[derive(Debug, Deserialize)]
struct Offered {
    function: Function,
}

#[derive(Debug, Deserialize)]
struct Function {
    name: String,
}

/// The SSE events answering `body`.
pub(super) fn answer(body: &[u8]) -> Result<Vec<Bytes>, String> {
    let request: Request =
        serde_json::from_slice(body).map_err(|e| format!("request is not JSON: {e}"))?;
    let called = request.messages.iter().any(|m| m.role == "tool");
    if called || request.tools.is_empty() {
        return Ok(text("First use done."));
    }
    let names: Vec<&str> = request
        .tools
        .iter()
        .map(|t| t.function.name.as_str())
        .collect();
    Ok(calls(&names))
}

/// Arguments `name` accepts (unknown tools get none).
fn arguments(name: &str) -> Value {
    match name {
        "write_text_content" => json!({"path": "first-use.txt", "text": "hello"}),
        "move_path" => json!({"from": "first-use.txt", "to": "moved.txt"}),
        "create_directory" => json!({"path": "first-use"}),
        "delete_path" => json!({"path": "not-there"}),
        "list_files" | "read_path_meta" => json!({"path": "."}),
        "get_text_content" => json!({"path": "first-use.txt"}),
        _ => json!({}),
    }
}

/// One turn calling each of `names` once.
fn calls(names: &[&str]) -> Vec<Bytes> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (index, name) in names.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": format!("call_first_{index}"), "type": "function", "function": {"name": name, "arguments": arguments(name).to_string()}}]}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offered_tool_is_called_once_then_the_answer_comes() {
        let offered = json!({"messages": [{"role": "user"}], "tools": [
            {"type": "function", "function": {"name": "list_files"}},
            {"type": "function", "function": {"name": "move_path"}}]});
        let turn = answer(&serde_json::to_vec(&offered).unwrap())
            .unwrap()
            .concat();
        let turn = String::from_utf8(turn).unwrap();
        assert_eq!(turn.matches("\"id\":\"call_first_").count(), 2, "{turn}");
        assert!(turn.contains("move_path") && turn.contains("list_files"));
        let answered = json!({"messages": [{"role": "user"}, {"role": "tool"}], "tools": []});
        let text = answer(&serde_json::to_vec(&answered).unwrap())
            .unwrap()
            .concat();
        assert!(String::from_utf8(text).unwrap().contains("\"stop\""));
    }
}
