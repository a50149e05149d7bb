//! Reads a `POST /chat` response as docs/api.md describes it, into the test's **own** event
//! type (`deny_unknown_fields`), so the wire format is checked from outside the host.

use serde::Deserialize;
use serde_json::Value;

/// One NDJSON event, as a client sees it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Event {
    /// Model text.
    #[serde(rename = "CHAT")]
    Chat { text: String },
    /// Live status: the model started a call (optional; `docs/api.md`).
    #[serde(rename = "TOOL_CALL_STARTED")]
    ToolCallStarted {
        index: usize,
        #[serde(default)]
        id: Option<String>,
        name: String,
    },
    /// Live status: a started call's argument bytes so far.
    #[serde(rename = "TOOL_CALL_PROGRESS")]
    ToolCallProgress { index: usize, bytes: usize },
    /// A tool call about to run.
    #[serde(rename = "TOOL_CALL")]
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
    /// The call waits for the user's decision (`docs/api.md`, "Approvals").
    #[serde(rename = "APPROVAL_REQUIRED")]
    ApprovalRequired {
        id: String,
        /// The server's id of this request for approval (absent from servers before it).
        #[serde(rename = "approvalId", default)]
        approval_id: Option<String>,
        name: String,
        args: Value,
        #[serde(rename = "conversationId")]
        conversation_id: String,
    },
    /// Its result.
    #[serde(rename = "TOOL_RESULT")]
    ToolResult {
        id: String,
        name: String,
        result: String,
        ok: bool,
    },
    /// Older messages were summarised (optional).
    #[serde(rename = "CONTEXT_COMPACTED")]
    ContextCompacted { covers: u64, summary: String },
    /// Something went wrong without ending the run (optional).
    #[serde(rename = "WARNING")]
    Warning { message: String },
    /// A failure after streaming began.
    #[serde(rename = "ERROR")]
    Error { message: String },
    /// The end.
    #[serde(rename = "DONE")]
    Done {
        #[serde(rename = "conversationId")]
        conversation_id: String,
        #[serde(rename = "stopReason")]
        stop_reason: String,
    },
}

/// One complete line of a stream as its event, its number (`seq`) left out; `None` for
/// `RUN_STARTED` and for what is no event.
pub fn event_of_line(line: &str) -> Option<Event> {
    let mut value: serde_json::Map<String, Value> = serde_json::from_str(line).ok()?;
    value.remove("seq")?;
    serde_json::from_value(Value::Object(value)).ok()
}

/// Reads a streaming response until its text holds `marker` (e.g. `"TOOL_CALL"`), and returns
/// what was read; the rest stays unread, so the test can leave mid-stream.
pub async fn read_until(response: &mut reqwest::Response, marker: &str) -> String {
    let mut seen = String::new();
    while !seen.contains(marker) {
        let chunk = response
            .chunk()
            .await
            .expect("the stream goes on")
            .unwrap_or_else(|| panic!("the stream ended before {marker}: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    seen
}

impl Event {
    /// True for the optional live-status events a client may ignore.
    pub fn is_live_status(&self) -> bool {
        matches!(
            self,
            Event::ToolCallStarted { .. } | Event::ToolCallProgress { .. }
        )
    }
}

/// A whole chat stream, checked for the invariants of docs/api.md.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The events in order as a client that ignores live status sees them (no
    /// `TOOL_CALL_STARTED`/`TOOL_CALL_PROGRESS`): what the older tests compare.
    pub events: Vec<Event>,
    /// Every event in order, live status included.
    pub all: Vec<Event>,
    /// `RUN_STARTED`'s conversation id and rojo, when the stream began with the run.
    pub started: Option<(String, String)>,
    /// The number (`seq`) of the stream's first and last events.
    pub seqs: (u64, u64),
}

impl Stream {
    /// Reads the whole body, checking the content type, that `DONE` comes last and only
    /// once, and that every `TOOL_CALL` is followed by its `TOOL_RESULT` before the next call.
    pub async fn read(response: reqwest::Response) -> Stream {
        assert_eq!(response.status(), 200, "chat should stream");
        assert_eq!(
            response.headers()["content-type"],
            "application/x-ndjson",
            "the content type of docs/api.md"
        );
        let body = response.text().await.expect("body");
        Stream::parse(&body)
    }

    /// Parses and checks an NDJSON body.
    pub fn parse(body: &str) -> Stream {
        assert!(
            body.ends_with('\n'),
            "every line ends with a newline: {body:?}"
        );
        let (started, seqs, events) = numbered(body);
        let dones = events
            .iter()
            .filter(|e| matches!(e, Event::Done { .. }))
            .count();
        assert_eq!(dones, 1, "exactly one DONE: {events:#?}");
        assert!(
            matches!(events.last(), Some(Event::Done { .. })),
            "DONE last: {events:#?}"
        );
        let mut open: Option<&str> = None;
        for event in &events {
            match event {
                Event::ToolCall { id, .. } => {
                    assert!(
                        open.is_none(),
                        "a TOOL_CALL before the previous result: {events:#?}"
                    );
                    open = Some(id);
                }
                Event::ToolResult { id, .. } => {
                    assert_eq!(
                        open,
                        Some(id.as_str()),
                        "TOOL_RESULT pairs with its TOOL_CALL: {events:#?}"
                    );
                    open = None;
                }
                _ => {}
            }
        }
        assert!(
            open.is_none(),
            "every TOOL_CALL gets its TOOL_RESULT: {events:#?}"
        );
        check_live_status(&events);
        let all = events;
        let events = all
            .iter()
            .filter(|e| !e.is_live_status())
            .cloned()
            .collect();
        Stream {
            events,
            all,
            started,
            seqs,
        }
    }

    /// `RUN_STARTED`'s conversation id (the stream must have begun with the run).
    pub fn started_conversation(&self) -> String {
        let (conversation, _) = self
            .started
            .clone()
            .expect("the stream began with RUN_STARTED");
        conversation
    }

    /// All `CHAT` text joined.
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Chat { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// `(name, args)` of every `TOOL_CALL`.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCall { name, args, .. } => Some((name.clone(), args.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(name, ok, result)` of every `TOOL_RESULT`.
    pub fn results(&self) -> Vec<(String, bool, String)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ToolResult {
                    name, ok, result, ..
                } => Some((name.clone(), *ok, result.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every `ERROR` message.
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Error { message } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// `DONE`'s conversation id and stop reason.
    pub fn done(&self) -> (String, String) {
        match self.events.last() {
            Some(Event::Done {
                conversation_id,
                stop_reason,
            }) => (conversation_id.clone(), stop_reason.clone()),
            other => panic!("no DONE: {other:?}"),
        }
    }
}

/// The lines of a stream: each numbered by `seq`, one more than the line before; the run's
/// first (`seq` 1) is `RUN_STARTED`, returned apart with the numbers of the first and last
/// lines and the other events.
#[allow(clippy::type_complexity)]
fn numbered(body: &str) -> (Option<(String, String)>, (u64, u64), Vec<Event>) {
    let mut started = None;
    let mut seqs: Option<(u64, u64)> = None;
    let mut events = Vec::new();
    for line in body.lines() {
        let mut value: serde_json::Map<String, Value> =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("bad event line {line:?}: {e}"));
        let seq = value
            .remove("seq")
            .and_then(|seq| seq.as_u64())
            .unwrap_or_else(|| panic!("every event has its number, seq: {line}"));
        seqs = Some(match seqs {
            None => (seq, seq),
            Some((first, last)) => {
                assert_eq!(seq, last + 1, "events are numbered in order: {body}");
                (first, seq)
            }
        });
        if value["type"] == "RUN_STARTED" {
            assert_eq!(seq, 1, "RUN_STARTED comes first: {body}");
            let field = |key: &str| {
                value[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("RUN_STARTED has {key}: {line}"))
                    .to_owned()
            };
            assert_eq!(value.len(), 3, "RUN_STARTED's fields: {line}");
            started = Some((field("conversationId"), field("rojo")));
            continue;
        }
        assert_ne!(seq, 1, "the run's first event is RUN_STARTED: {body}");
        events.push(
            serde_json::from_value(Value::Object(value))
                .unwrap_or_else(|e| panic!("bad event line {line:?}: {e}")),
        );
    }
    (started, seqs.unwrap_or((0, 0)), events)
}

/// The live-status rules of `docs/api.md`: a `TOOL_CALL_PROGRESS` follows its call's
/// `TOOL_CALL_STARTED` and its bytes only grow; every `TOOL_CALL` of a completed run was
/// started first under the same name.
fn check_live_status(events: &[Event]) {
    use std::collections::HashMap;
    let mut started: HashMap<usize, (String, usize)> = HashMap::new();
    let mut unclaimed: Vec<String> = Vec::new();
    for event in events {
        match event {
            Event::ToolCallStarted { index, name, .. } => {
                started.insert(*index, (name.clone(), 0));
                unclaimed.push(name.clone());
            }
            Event::ToolCallProgress { index, bytes } => {
                let Some((_, last)) = started.get_mut(index) else {
                    panic!("TOOL_CALL_PROGRESS before its TOOL_CALL_STARTED: {events:#?}");
                };
                assert!(*bytes > *last, "progress bytes only grow: {events:#?}");
                *last = *bytes;
            }
            Event::ToolCall { name, .. } => {
                let at = unclaimed.iter().position(|n| n == name);
                let at = at.unwrap_or_else(|| {
                    panic!("TOOL_CALL {name} without a TOOL_CALL_STARTED: {events:#?}")
                });
                unclaimed.remove(at);
                started.clear();
            }
            _ => {}
        }
    }
}
