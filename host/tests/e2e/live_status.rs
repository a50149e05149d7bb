//! Live status of tool calls (`docs/api.md`, "Live status"): `TOOL_CALL_STARTED` as soon as
//! the model names a call, throttled `TOOL_CALL_PROGRESS` while its arguments stream, then
//! the `TOOL_CALL` as before; a client that ignores the new events sees the old stream.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{
    builtins_host_with as host_with, demo_message as message,
    ndjson::{Event, Stream},
    upstream::Turn,
};

/// A 40 KB page, written by `write_text_content` in 7-character argument deltas.
fn big_page() -> String {
    "A line of the big page, long enough to count.\n".repeat(900)
}

#[tokio::test]
async fn a_long_argument_streamed_slowly_is_started_by_name_then_grows_in_throttled_steps() {
    let page = big_page();
    let args = json!({"path": "docs/big.page", "text": page});
    let call = Turn::tool_calls(&[("call_big", "write_text_content", args.clone())])
        .split_every(16 * 1024)
        .chunk_delay(Duration::from_millis(40));
    let (host, _upstream) = host_with(vec![call, Turn::text("Written.")]).await;
    let began = Instant::now();
    let stream = Stream::read(host.chat(message("write the big page")).await).await;
    let elapsed = began.elapsed();

    // STARTED before everything else of the call, with the provider's id.
    let started_at = stream
        .all
        .iter()
        .position(|e| matches!(e, Event::ToolCallStarted { .. }))
        .expect("a TOOL_CALL_STARTED");
    assert_eq!(
        stream.all[started_at],
        Event::ToolCallStarted {
            index: 0,
            id: Some("call_big".into()),
            name: "write_text_content".into()
        }
    );
    let call_at = stream
        .all
        .iter()
        .position(|e| matches!(e, Event::ToolCall { .. }))
        .expect("a TOOL_CALL");
    assert!(started_at < call_at);

    // PROGRESS between them, growing, within the argument's size, and throttled: the
    // upstream sent about 5,800 argument deltas; at most one event per 100 ms went out.
    let bytes: Vec<usize> = stream.all[started_at..call_at]
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallProgress { index: 0, bytes } => Some(*bytes),
            _ => None,
        })
        .collect();
    let raw_len = args.to_string().len();
    assert!(bytes.len() >= 3, "several progress steps: {bytes:?}");
    assert!(bytes.windows(2).all(|w| w[0] < w[1]), "{bytes:?}");
    assert!(*bytes.last().unwrap() <= raw_len, "{bytes:?} vs {raw_len}");
    let ceiling = elapsed.as_millis() as usize / 100 + 1;
    assert!(
        bytes.len() <= ceiling,
        "{} progress events in {elapsed:?}",
        bytes.len()
    );

    // A client that ignores live status sees exactly the stream it saw before.
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "completed");
    assert_eq!(
        stream.events,
        vec![
            Event::ToolCall {
                id: "call_big".into(),
                name: "write_text_content".into(),
                args
            },
            Event::ToolResult {
                id: "call_big".into(),
                name: "write_text_content".into(),
                result: r#"{"ok":true}"#.into(),
                ok: true
            },
            Event::Chat {
                text: "Written.".into()
            },
            Event::Done {
                conversation_id: conversation,
                stop_reason: "completed".into()
            },
        ]
    );
    let written = std::fs::read_to_string(host.project_root("demo").join("docs/big.page"));
    assert_eq!(written.unwrap(), page);
}

#[tokio::test]
async fn calls_sent_whole_in_one_chunk_are_started_before_their_tool_call() {
    // Gemini-style whole calls without `index` or id, two in one chunk.
    let turn = Turn::deltas(
        &[json!({"role": "assistant", "content": null, "tool_calls": [
            {"type": "function", "function": {"name": "create_directory", "arguments": "{\"path\":\"a\"}"}},
            {"type": "function", "function": {"name": "list_files", "arguments": "{\"path\":\".\"}"}}
        ]})],
        "tool_calls",
    );
    let (host, _upstream) = host_with(vec![turn, Turn::text("Done.")]).await;
    let stream = Stream::read(host.chat(message("make a")).await).await;
    let kinds: Vec<String> = stream
        .all
        .iter()
        .map(|e| match e {
            Event::ToolCallStarted { index, name, id } => {
                assert!(id.is_none(), "no provider id to pass on");
                format!("started {index} {name}")
            }
            Event::ToolCall { name, .. } => format!("call {name}"),
            Event::ToolResult { name, .. } => format!("result {name}"),
            Event::ApprovalRequired { name, .. } => format!("approval {name}"),
            Event::ContextCompacted { covers, .. } => format!("compacted {covers}"),
            Event::ToolCallProgress { .. } => "progress".into(),
            Event::Chat { .. } => "chat".into(),
            Event::Error { .. } => "error".into(),
            Event::Warning { .. } => "warning".into(),
            Event::Done { .. } => "done".into(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "started 0 create_directory",
            "started 1 list_files",
            "call create_directory",
            "result create_directory",
            "call list_files",
            "result list_files",
            "chat",
            "done"
        ]
    );
}
