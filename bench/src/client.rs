//! One client's conversation: `POST /chat` with the reference message, the NDJSON body read as it
//! arrives (time to first event, total latency) and checked event by event against what the
//! docs/intro conversation must stream: both tool calls and their `ok` results, the answer's
//! text, `DONE` with `stopReason: completed` last. Any other chat can be followed to its end
//! with its events only counted ([`follow_chat`]), for streams too large to keep.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::upstream::{self, FILE, FOLDER, MESSAGE, PAGE};

/// A conversation that streamed as it should.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// From sending the request to the end of the body.
    pub(crate) latency: Duration,
    /// From sending the request to the first complete event line.
    pub(crate) first_event: Duration,
    /// The longest wait between two pieces of the body once the first came: a stream the
    /// host left waiting (the scripted upstream's own longest is a turn's time to first
    /// token, between a tool's result and the next turn's text).
    pub(crate) longest_pause: Duration,
    /// `DONE.conversationId`.
    pub(crate) conversation: String,
}

/// Runs the reference conversation in `project`.
pub(crate) async fn conversation(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    project: &str,
) -> Result<Sample, String> {
    let started = Instant::now();
    let mut response = start_chat(http, url, token, project, MESSAGE).await?;
    let mut body = Vec::new();
    let mut first_event = None;
    let (mut last_piece, mut longest_pause) = (None::<Instant>, Duration::ZERO);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("body failed after {} bytes: {e}", body.len()))?
    {
        let now = Instant::now();
        if let Some(last) = last_piece {
            longest_pause = longest_pause.max(now - last);
        }
        last_piece = Some(now);
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
        longest_pause,
        conversation,
    })
}

/// Sends `POST /chat` with `message` in `project`; the response once it is known to be a
/// `200` NDJSON stream.
pub(crate) async fn start_chat(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    project: &str,
    message: &str,
) -> Result<reqwest::Response, String> {
    let response = http
        .post(format!("{url}/chat"))
        .bearer_auth(token)
        .json(&json!({"projectId": project, "message": message}))
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
    Ok(response)
}

/// How a chat stream went, counted event by event.
#[derive(Debug, Default)]
pub(crate) struct Ending {
    /// Bytes of NDJSON read.
    pub(crate) body_bytes: u64,
    /// `TOOL_CALL` events.
    pub(crate) tool_calls: u64,
    /// `TOOL_RESULT` events with `ok: true`, and with `ok: false`.
    pub(crate) results: (u64, u64),
    /// Bytes of `CHAT` text.
    pub(crate) chat_bytes: u64,
    /// The first few `ERROR` messages.
    pub(crate) errors: Vec<String>,
    /// `DONE.stopReason`, once `DONE` came.
    pub(crate) stop_reason: Option<String>,
    /// `DONE.conversationId`.
    pub(crate) conversation: Option<String>,
    /// Why the stream could not be read to its end (cut, a bad line, too slow).
    pub(crate) problem: Option<String>,
    /// `CONTEXT_COMPACTED` events: older messages summarised to fit the model's window.
    pub(crate) compactions: u64,
}

/// The fields of an event that [`follow_chat`] counts; the rest (tool arguments and results)
/// is skipped while parsing.
#[derive(Debug, Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
    ok: Option<bool>,
    text: Option<String>,
    message: Option<String>,
    #[serde(rename = "stopReason")]
    stop_reason: Option<String>,
    #[serde(rename = "conversationId")]
    conversation_id: Option<String>,
}

/// Reads a chat stream to its end, or for at most `limit`, counting its events.
pub(crate) async fn follow_chat(response: reqwest::Response, limit: Duration) -> Ending {
    let mut ending = Ending::default();
    let outcome = tokio::time::timeout(limit, read_events(response, &mut ending)).await;
    let problem = match outcome {
        Ok(Ok(())) if ending.stop_reason.is_none() => {
            Some("the stream ended without DONE".to_owned())
        }
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some(format!("no end within {} s", limit.as_secs())),
    };
    ending.problem = problem;
    ending
}

async fn read_events(mut response: reqwest::Response, ending: &mut Ending) -> Result<(), String> {
    let mut line = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("body failed after {} bytes: {e}", ending.body_bytes))?
    {
        feed(&mut line, &chunk, ending)?;
    }
    if line.is_empty() {
        Ok(())
    } else {
        Err("the body does not end with a newline".to_owned())
    }
}

/// Counts the events of a whole NDJSON body.
pub(crate) fn count_events(body: &[u8]) -> Result<Ending, String> {
    let (mut line, mut ending) = (Vec::new(), Ending::default());
    feed(&mut line, body, &mut ending)?;
    if line.is_empty() {
        Ok(ending)
    } else {
        Err("the body does not end with a newline".to_owned())
    }
}

/// Counts the events that `chunk` completes; `line` keeps the unfinished one. Each byte is
/// looked at once, however long a line grows.
fn feed(line: &mut Vec<u8>, chunk: &[u8], ending: &mut Ending) -> Result<(), String> {
    ending.body_bytes += chunk.len() as u64;
    let mut rest = chunk;
    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
        line.extend_from_slice(&rest[..end]);
        count_event(line, ending)?;
        line.clear();
        rest = &rest[end + 1..];
    }
    line.extend_from_slice(rest);
    Ok(())
}

fn count_event(line: &[u8], ending: &mut Ending) -> Result<(), String> {
    let event: EventHead =
        serde_json::from_slice(line).map_err(|e| format!("bad event line: {e}"))?;
    match event.kind.as_str() {
        "TOOL_CALL" => ending.tool_calls += 1,
        "TOOL_RESULT" if event.ok == Some(true) => ending.results.0 += 1,
        "TOOL_RESULT" => ending.results.1 += 1,
        "CHAT" => ending.chat_bytes += event.text.map_or(0, |t| t.len() as u64),
        "CONTEXT_COMPACTED" => ending.compactions += 1,
        "ERROR" if ending.errors.len() < 3 => ending.errors.extend(event.message),
        "DONE" => {
            ending.stop_reason = event.stop_reason;
            ending.conversation = event.conversation_id;
        }
        _ => {}
    }
    Ok(())
}

/// The optional events that tell a client what the model is writing.
const LIVE_STATUS: [&str; 2] = ["TOOL_CALL_STARTED", "TOOL_CALL_PROGRESS"];

/// Checks a whole NDJSON body (the live status events aside); returns the conversation id.
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
    // The optional live status of a call the model is still writing (docs/api.md) comes
    // before its TOOL_CALL; the conversation is checked without it, without the run's
    // `RUN_STARTED` and without the events' numbers (`seq`, for a client that rejoins).
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| {
            let kind = e["type"].as_str().unwrap_or_default();
            !LIVE_STATUS.contains(&kind) && kind != "RUN_STARTED"
        })
        .map(|mut e| {
            if let Some(fields) = e.as_object_mut() {
                fields.remove("seq");
            }
            e
        })
        .collect();
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
    if answer != upstream::answer().text {
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
    use crate::upstream::ANSWER;

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
    fn events_are_counted_across_any_cut_of_the_body() {
        let mut all = events();
        all[1]["ok"] = json!(false);
        let body = body(&all);
        for cut in [1, 7, 64, body.len()] {
            let (mut line, mut ending) = (Vec::new(), Ending::default());
            for piece in body.chunks(cut) {
                feed(&mut line, piece, &mut ending).unwrap();
            }
            assert!(line.is_empty());
            assert_eq!(ending.body_bytes, body.len() as u64);
            assert_eq!((ending.tool_calls, ending.results), (2, (1, 1)));
            assert_eq!(ending.chat_bytes, ANSWER.len() as u64);
            assert_eq!(ending.stop_reason.as_deref(), Some("completed"));
            assert_eq!(ending.conversation.as_deref(), Some("abc"));
        }
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

    /// Serves `POST /chat` on loopback: the reference conversation's events, one write each, waiting `pause`
    /// before the second tool call's result; the server's URL.
    async fn pausing_server(pause: Duration) -> String {
        use axum::{body::Body, routing::post, Router};
        use futures_util::StreamExt as _;
        let chat = move || async move {
            let lines = events()
                .into_iter()
                .enumerate()
                .map(move |(i, event)| async move {
                    if i == 3 {
                        tokio::time::sleep(pause).await;
                    }
                    Ok::<_, std::io::Error>(format!("{event}\n"))
                });
            let stream = futures_util::stream::iter(lines).then(|line| line);
            (
                [("content-type", "application/x-ndjson")],
                Body::from_stream(stream),
            )
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let app = Router::new().route("/chat", post(chat));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    #[tokio::test]
    async fn a_conversation_reports_the_longest_pause_in_its_stream() {
        // The pause is measured between two pieces' arrivals, so it comes out shorter when
        // the piece before it was read late (a busy machine): the two streams are told apart
        // at half the pause, not at the pause itself.
        let pause = Duration::from_millis(400);
        let http = reqwest::Client::new();
        let paused = pausing_server(pause).await;
        let sample = conversation(&http, &paused, "token", "p")
            .await
            .expect("valid");
        assert!(
            sample.longest_pause >= pause / 2 && sample.longest_pause <= sample.latency,
            "{sample:?}"
        );
        let steady = pausing_server(Duration::ZERO).await;
        let sample = conversation(&http, &steady, "token", "p")
            .await
            .expect("valid");
        assert!(sample.longest_pause < pause / 2, "{sample:?}");
    }

    #[test]
    fn live_status_events_before_a_call_are_passed_over() {
        let mut live = events();
        live.insert(
            2,
            json!({"type": "TOOL_CALL_STARTED", "index": 0, "id": "call_write", "name": "write_text_content"}),
        );
        live.insert(
            3,
            json!({"type": "TOOL_CALL_PROGRESS", "index": 0, "bytes": 40}),
        );
        live.insert(
            0,
            json!({"type": "TOOL_CALL_STARTED", "index": 0, "id": "call_mkdir", "name": "create_directory"}),
        );
        assert_eq!(check_stream(&body(&live)), Ok("abc".to_owned()));
    }
}
