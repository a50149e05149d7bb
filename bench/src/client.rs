//! One client's conversation: `POST /chat` with the seed message, the NDJSON body read as it
//! arrives (time to first event, total latency) and checked event by event against what the
//! docs/intro conversation must stream: both tool calls and their `ok` results, the answer's
//! text, `DONE` with `stopReason: completed` last.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::upstream::{ANSWER, FILE, FOLDER, MESSAGE, PAGE};

/// A conversation that streamed as it should.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// From sending the request to the end of the body.
    pub(crate) latency: Duration,
    /// From sending the request to the first complete event line.
    pub(crate) first_event: Duration,
    /// `DONE.conversationId`.
    pub(crate) conversation: String,
}

/// Runs the seed conversation in `project`.
pub(crate) async fn conversation(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    project: &str,
) -> Result<Sample, String> {
    let started = Instant::now();
    let mut response = http
        .post(format!("{url}/chat"))
        .bearer_auth(token)
        .json(&json!({"projectId": project, "message": MESSAGE}))
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    if response.status() != 200 {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        return Err(format!("status {status}: {body}"));
    }
    if response.headers().get("content-type").map(|v| v.as_bytes()) != Some(b"application/x-ndjson")
    {
        return Err("wrong content type".to_owned());
    }
    let mut body = Vec::new();
    let mut first_event = None;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("body failed after {} bytes: {e}", body.len()))?
    {
        body.extend_from_slice(&chunk);
        if first_event.is_none() && body.contains(&b'\n') {
            first_event = Some(started.elapsed());
        }
    }
    let latency = started.elapsed();
    let conversation = check_stream(&body)?;
    Ok(Sample {
        latency,
        first_event: first_event.unwrap_or(latency),
        conversation,
    })
}

/// Checks a whole NDJSON body; returns the conversation id.
pub(crate) fn check_stream(body: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(body).map_err(|_| "body is not UTF-8".to_owned())?;
    if !text.ends_with('\n') {
        return Err("body does not end with a newline".to_owned());
    }
    let events = text
        .lines()
        .map(serde_json::from_str::<Value>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad event line: {e}"))?;
    let expect = |i: usize, event: Value| -> Result<(), String> {
        match events.get(i) {
            Some(got) if *got == event => Ok(()),
            got => Err(format!("event {i}: expected {event}, got {got:?}")),
        }
    };
    expect(
        0,
        json!({"type": "TOOL_CALL", "id": "call_mkdir", "name": "create_directory", "args": {"path": FOLDER}}),
    )?;
    expect(
        1,
        json!({"type": "TOOL_RESULT", "id": "call_mkdir", "name": "create_directory", "result": "{\"ok\":true}", "ok": true}),
    )?;
    expect(
        2,
        json!({"type": "TOOL_CALL", "id": "call_write", "name": "write_text_content", "args": {"path": FILE, "text": PAGE}}),
    )?;
    expect(
        3,
        json!({"type": "TOOL_RESULT", "id": "call_write", "name": "write_text_content", "result": "{\"ok\":true}", "ok": true}),
    )?;
    let (done, chats) = events[4..]
        .split_last()
        .ok_or_else(|| "no DONE".to_owned())?;
    let mut answer = String::new();
    for chat in chats {
        match (chat["type"].as_str(), chat["text"].as_str()) {
            (Some("CHAT"), Some(text)) => answer.push_str(text),
            _ => return Err(format!("expected CHAT, got {chat}")),
        }
    }
    if answer != ANSWER {
        return Err(format!("answer text {answer:?}"));
    }
    if done["type"] != "DONE" || done["stopReason"] != "completed" {
        return Err(format!("expected DONE completed, got {done}"));
    }
    done["conversationId"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("DONE without a conversation id: {done}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<Value> {
        vec![
            json!({"type": "TOOL_CALL", "id": "call_mkdir", "name": "create_directory", "args": {"path": FOLDER}}),
            json!({"type": "TOOL_RESULT", "id": "call_mkdir", "name": "create_directory", "result": "{\"ok\":true}", "ok": true}),
            json!({"type": "TOOL_CALL", "id": "call_write", "name": "write_text_content", "args": {"path": FILE, "text": PAGE}}),
            json!({"type": "TOOL_RESULT", "id": "call_write", "name": "write_text_content", "result": "{\"ok\":true}", "ok": true}),
            json!({"type": "CHAT", "text": &ANSWER[..10]}),
            json!({"type": "CHAT", "text": &ANSWER[10..]}),
            json!({"type": "DONE", "conversationId": "abc", "stopReason": "completed"}),
        ]
    }

    fn body(events: &[Value]) -> Vec<u8> {
        events
            .iter()
            .map(|e| format!("{e}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn the_seed_stream_passes_and_a_failed_tool_does_not() {
        assert_eq!(check_stream(&body(&events())), Ok("abc".to_owned()));
        let mut failed = events();
        failed[3]["ok"] = json!(false);
        assert!(check_stream(&body(&failed)).is_err());
        let mut stopped = events();
        stopped[6]["stopReason"] = json!("provider_error");
        assert!(check_stream(&body(&stopped)).is_err());
        let mut short = events();
        short.remove(5);
        assert!(check_stream(&body(&short)).is_err());
    }
}
