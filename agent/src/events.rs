//! The NDJSON events a chat streams to its client: the wire format of `POST /chat`.
//!
//! One JSON object per line, flushed as each event happens, numbered from 1 by `seq` (the
//! number a client rejoins after, `feed.rs`); `RUN_STARTED` comes first:
//!
//! ```text
//! {"type":"RUN_STARTED","conversationId":"3kTMd9aQ2xW7pLb0yZc1vE","rojo":"default","seq":1}
//! {"type":"CHAT","text":"I'll create it.","seq":2}
//! {"type":"TOOL_CALL","id":"call_1","name":"create_directory","args":{"path":"docs/intro"},"seq":3}
//! {"type":"TOOL_RESULT","id":"call_1","name":"create_directory","result":"{\"ok\":true}","ok":true,"seq":4}
//! {"type":"CHAT","text":"Done.","seq":5}
//! {"type":"DONE","conversationId":"3kTMd9aQ2xW7pLb0yZc1vE","stopReason":"completed","seq":6}
//! ```
//!
//! While the model streams a call, optional live-status events may come first:
//! `TOOL_CALL_STARTED` (index, name) then throttled `TOOL_CALL_PROGRESS` (argument bytes so
//! far); clients that ignore them lose nothing (`progress.rs`).
//! A call the rojo's `approve` names is followed by `APPROVAL_REQUIRED` while it waits for
//! the user's decision (`approval.rs`), then by its `TOOL_RESULT` as usual.
//! `CONTEXT_COMPACTED` says older messages were summarised to fit the model's context window
//! (`context`); `WARNING` tells what went wrong without ending the run. `TOOL_CALL`/`TOOL_RESULT` pair by `id`; `ERROR` reports a failure after streaming began;
//! `DONE` always ends the stream and says why the run stopped. See `docs/api.md`.

use serde::Serialize;
use serde_json::Value;

/// One event of a chat stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    /// The run started: always the first event, so a client knows the conversation (a new
    /// one's id included) before anything else.
    RunStarted {
        /// The conversation the run belongs to.
        #[serde(rename = "conversationId")]
        conversation_id: String,
        /// The rojo that answers.
        rojo: String,
    },
    /// A piece of the model's text, as it arrives.
    Chat {
        /// The text.
        text: String,
    },
    /// The model started a tool call: its name is known, its arguments may still be
    /// streaming. Live status only; `TOOL_CALL` follows with the whole call.
    ToolCallStarted {
        /// The call's position in the model's turn (0-based); `TOOL_CALL_PROGRESS` repeats it.
        index: usize,
        /// The provider's call id when it came with the name (`TOOL_CALL`'s may differ).
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name as the model gave it.
        name: String,
    },
    /// A started call's arguments grew to `bytes` (throttled; live status only).
    ToolCallProgress {
        /// The `TOOL_CALL_STARTED` index.
        index: usize,
        /// Bytes of arguments received so far.
        bytes: usize,
    },
    /// The model asked for a tool call; it is about to run.
    ToolCall {
        /// The call id (pairs with its result).
        id: String,
        /// The tool name as the model gave it.
        name: String,
        /// The arguments (the raw text as a string when they are not valid JSON).
        args: Value,
    },
    /// The call (announced by its `TOOL_CALL`) waits for the user's decision
    /// (`POST /conversations/{id}/approvals/{approvalId}`); its `TOOL_RESULT` follows once
    /// decided, timed out or cancelled. Clients that ignore it see the run wait.
    ApprovalRequired {
        /// The call id, as in `TOOL_CALL` (the model's: unique only within its turn).
        id: String,
        /// The server's id of this one request for approval, the one to decide.
        #[serde(rename = "approvalId")]
        approval_id: String,
        /// The tool name.
        name: String,
        /// The arguments, as in `TOOL_CALL`.
        args: Value,
        /// The conversation, for the decision's URL (a new conversation's id is otherwise
        /// only known at `DONE`).
        #[serde(rename = "conversationId")]
        conversation_id: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
        /// The text the model is given.
        result: String,
        /// Whether the tool succeeded.
        ok: bool,
    },
    /// The conversation outgrew the model's context window: its first `covers` messages
    /// were summarised, and model turns send `summary` in their place from now on (the
    /// stored messages are kept). Optional: a client that ignores it loses nothing.
    ContextCompacted {
        /// How many messages, from the first, the summary stands for.
        covers: u64,
        /// The summary the model made.
        summary: String,
    },
    /// Something the user should know that did not end the run: the provider cut the
    /// request to a smaller context window than planned for without saying so, and the
    /// turn was fitted to it and asked again (its first answer was not passed on).
    /// Optional: a client that ignores it loses nothing.
    Warning {
        /// What happened, for the user.
        message: String,
    },
    /// A failure after streaming began.
    Error {
        /// What went wrong, for the user.
        message: String,
    },
    /// The end of the stream.
    Done {
        /// The conversation, to continue it.
        #[serde(rename = "conversationId")]
        conversation_id: String,
        /// Why the run stopped.
        #[serde(rename = "stopReason")]
        stop_reason: StopReason,
    },
}

/// Why a run stopped (`DONE.stopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered in text.
    Completed,
    /// `max_steps` model turns were used.
    MaxSteps,
    /// The provider failed (unreachable, error status, error in the stream, cut stream).
    ProviderError,
    /// Stopped: asked by a client, nobody followed it, or the server is shutting down.
    Cancelled,
    /// The server failed (e.g. the conversation store).
    InternalError,
    /// The conversation reached `limits.max_conversation_bytes`; an `ERROR` says so.
    LimitReached,
}

impl StopReason {
    /// The reason as `DONE.stopReason` spells it (also the `stop_reason` label of
    /// `rojos_chats_finished_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::MaxSteps => "max_steps",
            StopReason::ProviderError => "provider_error",
            StopReason::Cancelled => "cancelled",
            StopReason::InternalError => "internal_error",
            StopReason::LimitReached => "limit_reached",
        }
    }
}

impl Event {
    /// The event as one NDJSON line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("events always serialise");
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stop_reasons_are_the_wire_spelling_and_the_metrics_labels() {
        let stops = [
            StopReason::Completed,
            StopReason::MaxSteps,
            StopReason::ProviderError,
            StopReason::Cancelled,
            StopReason::InternalError,
            StopReason::LimitReached,
        ];
        for stop in stops {
            let wire = serde_json::to_value(stop).unwrap();
            assert_eq!(wire, stop.as_str());
        }
        let labels: Vec<&str> = stops.into_iter().map(StopReason::as_str).collect();
        assert_eq!(labels, rojos_metrics::STOP_REASONS);
    }

    #[test]
    fn events_serialise_to_the_contract_wire_format() {
        let cases = [
            (
                Event::RunStarted {
                    conversation_id: "abc".into(),
                    rojo: "careful".into(),
                },
                r#"{"type":"RUN_STARTED","conversationId":"abc","rojo":"careful"}"#,
            ),
            (
                Event::Chat { text: "hi".into() },
                r#"{"type":"CHAT","text":"hi"}"#,
            ),
            (
                Event::ToolCall {
                    id: "c1".into(),
                    name: "list_files".into(),
                    args: json!({"path": "."}),
                },
                r#"{"type":"TOOL_CALL","id":"c1","name":"list_files","args":{"path":"."}}"#,
            ),
            (
                Event::ToolCallStarted {
                    index: 0,
                    id: Some("c1".into()),
                    name: "write_text_content".into(),
                },
                r#"{"type":"TOOL_CALL_STARTED","index":0,"id":"c1","name":"write_text_content"}"#,
            ),
            (
                Event::ToolCallStarted {
                    index: 1,
                    id: None,
                    name: "list_files".into(),
                },
                r#"{"type":"TOOL_CALL_STARTED","index":1,"name":"list_files"}"#,
            ),
            (
                Event::ToolCallProgress {
                    index: 0,
                    bytes: 12_345,
                },
                r#"{"type":"TOOL_CALL_PROGRESS","index":0,"bytes":12345}"#,
            ),
            (
                Event::ApprovalRequired {
                    id: "c1".into(),
                    approval_id: "approval_x".into(),
                    name: "delete_path".into(),
                    args: json!({"path": "a"}),
                    conversation_id: "abc".into(),
                },
                r#"{"type":"APPROVAL_REQUIRED","id":"c1","approvalId":"approval_x","name":"delete_path","args":{"path":"a"},"conversationId":"abc"}"#,
            ),
            (
                Event::ToolResult {
                    id: "c1".into(),
                    name: "list_files".into(),
                    result: "[]".into(),
                    ok: true,
                },
                r#"{"type":"TOOL_RESULT","id":"c1","name":"list_files","result":"[]","ok":true}"#,
            ),
            (
                Event::Error {
                    message: "boom".into(),
                },
                r#"{"type":"ERROR","message":"boom"}"#,
            ),
            (
                Event::Done {
                    conversation_id: "abc".into(),
                    stop_reason: StopReason::MaxSteps,
                },
                r#"{"type":"DONE","conversationId":"abc","stopReason":"max_steps"}"#,
            ),
        ];
        for (event, wire) in cases {
            assert_eq!(event.to_line(), format!("{wire}\n"));
        }
    }
}
