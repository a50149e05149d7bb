//! The database stopped and restarted under load: sixteen clients keep chatting, each on its
//! own conversation (one tool call and a slowly streamed answer per message), through the
//! real `rojos` binary on a PostgreSQL server of its own, which the test stops for a few
//! seconds and starts again. Every response is a complete stream, a `503` with the
//! documented message, or a stream whose `ERROR` is the store's message followed by `DONE`
//! (a `409` only while a lease the outage left behind is released); once the database is
//! back every client's next message completes without restarting rojos; and every message
//! whose stream completed is stored, in order, in a history every provider accepts.

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::postgres::{chat, config_dir, own_cluster, serve, UNAVAILABLE};
use crate::support::{
    host::{client, stored_messages_at},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// Clients chatting at once, each on its own conversation.
const CLIENTS: usize = 16;
/// The model's answer to every message, after its tool call.
const REPLY: &str = "I listed the project folder; here is what it holds.";
/// A response (its status, or its whole body) taking longer than this is a hang.
const HANG: Duration = Duration::from_secs(90);
/// What the next message stores to close a history a run left on a user message.
const INTERRUPTED: &str = "(no answer: the run was interrupted)";
/// How long the database stays stopped.
const OUTAGE: Duration = Duration::from_secs(3);
/// Messages completed by each client, on average, before the database stops.
const BEFORE: usize = 3;

/// What the test and its clients share.
#[derive(Debug, Default)]
struct Progress {
    /// Set once the database is back and `/readyz` says so.
    back: AtomicBool,
    /// Messages completed so far, by every client.
    completed: AtomicUsize,
}

/// How one message ended, as its client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A stream ending in `DONE` `completed`, with the tool call and the whole reply.
    Completed,
    /// `503` with the documented message: nothing was started.
    Refused,
    /// A stream whose only `ERROR` is the store's, then `DONE` `internal_error`.
    StoreFailed,
}

/// One message a client sent.
#[derive(Debug, Clone)]
struct Sent {
    text: String,
    /// The conversation it was sent to (`None`: a new one).
    to: Option<String>,
    /// The conversation `DONE` named.
    done_in: Option<String>,
    outcome: Outcome,
}

impl Sent {
    fn belongs_to(&self, conversation: &str) -> bool {
        self.to.as_deref() == Some(conversation) || self.done_in.as_deref() == Some(conversation)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_chatting_through_a_database_restart_lose_no_acknowledged_message() {
    let upstream = ScriptedUpstream::start_per_message(
        Turn::tool_calls(&[("call_list", "list_files", json!({"path": "."}))]),
        Turn::text(REPLY).chunk_delay(Duration::from_millis(40)),
    )
    .await;
    let cluster = own_cluster();
    let dir = config_dir(&cluster, &upstream);
    let (_rojos, url) = serve(&cluster, &dir);
    let progress = Arc::new(Progress::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(keep_chatting(url.clone(), i, Arc::clone(&progress))))
        .collect();
    // Under load, with acknowledged messages in every conversation, and runs streaming.
    until_completed(&progress, BEFORE * CLIENTS).await;

    tokio::task::block_in_place(|| cluster.stop_server()).unwrap();
    tokio::time::sleep(OUTAGE).await;
    tokio::task::block_in_place(|| cluster.start_server()).unwrap();
    until_ready(&url).await;
    progress.back.store(true, Ordering::SeqCst);

    let (mut all, mut repaired) = (Vec::new(), 0);
    for (i, running) in clients.into_iter().enumerate() {
        let sent = running.await.unwrap_or_else(|e| panic!("client {i}: {e}"));
        repaired += usize::from(assert_stored(&url, i, &sent).await);
        all.extend(sent);
    }
    let count = |outcome| all.iter().filter(|s| s.outcome == outcome).count();
    let (refused, failed) = (count(Outcome::Refused), count(Outcome::StoreFailed));
    // The outage reached messages before their run started and runs already streaming.
    assert!(refused > 0, "no 503 among {} messages", all.len());
    assert!(
        repaired > 0,
        "no history was left on a user message and closed"
    );
    assert!(
        failed > 0,
        "no stream ended on the store's ERROR among {}",
        all.len()
    );
}

/// One client: sends messages on its conversation one after the other until its first
/// message sent after the database is back, which must complete.
async fn keep_chatting(url: String, client: usize, progress: Arc<Progress>) -> Vec<Sent> {
    let mut sent: Vec<Sent> = Vec::new();
    for n in 0.. {
        let after_restart = progress.back.load(Ordering::SeqCst);
        let to = sent.iter().rev().find_map(|s| s.done_in.clone());
        let text = format!("client {client} message {n}");
        let (outcome, done_in) = send(&url, &text, to.as_deref()).await;
        sent.push(Sent {
            text,
            to,
            done_in,
            outcome,
        });
        if after_restart {
            assert_eq!(
                outcome,
                Outcome::Completed,
                "client {client}: the first message after the restart: {sent:#?}"
            );
            return sent;
        }
        if outcome == Outcome::Completed {
            progress.completed.fetch_add(1, Ordering::SeqCst);
        }
        if outcome == Outcome::Refused {
            // The database is down: try again soon, as a client would, without spinning.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    unreachable!("the loop returns")
}

/// Sends `text` and reads the response to its end. A `409` (a lease the outage left
/// behind, released by a retry once the database is back) is sent again, for thirty
/// seconds at most; anything but `200`, `503` or `409` fails the test, as does a response
/// that never ends or a connection that breaks.
async fn send(url: &str, text: &str, conversation: Option<&str>) -> (Outcome, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = tokio::time::timeout(HANG, chat(url, text, conversation))
            .await
            .unwrap_or_else(|_| panic!("{text}: no response status within {HANG:?}"));
        let status = response.status().as_u16();
        if status == 200 {
            return read_stream(text, response).await;
        }
        let body = tokio::time::timeout(HANG, response.text())
            .await
            .unwrap_or_else(|_| panic!("{text}: the {status} body never ended"))
            .unwrap_or_else(|e| panic!("{text}: the {status} body broke off: {e}"));
        let error = error_of(&body);
        match status {
            503 => {
                assert_eq!(error, UNAVAILABLE, "{text}");
                return (Outcome::Refused, None);
            }
            409 if Instant::now() < deadline => {
                assert!(
                    error.starts_with("a reply is still being written"),
                    "{text}: {body}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ => panic!("{text}: unexpected {status}: {body}"),
        }
    }
}

/// A `200` response read whole: `Completed` or `StoreFailed`, and `DONE`'s conversation.
async fn read_stream(text: &str, response: reqwest::Response) -> (Outcome, Option<String>) {
    let body = tokio::time::timeout(HANG, response.text())
        .await
        .unwrap_or_else(|_| panic!("{text}: the stream did not end within {HANG:?}"))
        .unwrap_or_else(|e| panic!("{text}: the stream broke off: {e}"));
    // `parse` checks that `DONE` comes last, once, and each call has its result.
    let stream = Stream::parse(&body);
    let (conversation, stop) = stream.done();
    let errors = stream.errors();
    if errors.is_empty() {
        assert_eq!(stop, "completed", "{text}: {stream:#?}");
        assert_eq!(stream.text(), REPLY, "{text}");
        assert_eq!(stream.results().len(), 1, "{text}: {stream:#?}");
        return (Outcome::Completed, Some(conversation));
    }
    assert_eq!(errors.len(), 1, "{text}: {stream:#?}");
    assert!(
        errors[0].starts_with("the conversation could not be saved")
            && errors[0].ends_with("the database is unreachable"),
        "{text}: {errors:?}"
    );
    assert_eq!(stop, "internal_error", "{text}");
    (Outcome::StoreFailed, Some(conversation))
}

/// Waits (two minutes at most) until the clients have completed `count` messages.
async fn until_completed(progress: &Progress, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while progress.completed.load(Ordering::SeqCst) < count {
        assert!(
            Instant::now() < deadline,
            "only {:?} messages completed",
            progress.completed
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (a minute at most) until `/readyz` answers `200`.
async fn until_ready(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = client()
            .get(format!("{url}/readyz"))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if status.as_ref().is_ok_and(|s| *s == 200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz after the restart: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checks client `client`'s conversation (the one its last, completed, message went to):
/// a history every provider accepts; its user messages, in the order sent, are the
/// messages sent to it minus those refused and perhaps some whose run failed; each
/// completed message is followed by its tool call, the tool's result and the reply.
/// Returns whether a run the outage cut short was closed by the next message.
async fn assert_stored(url: &str, client: usize, sent: &[Sent]) -> bool {
    let conversation = sent
        .last()
        .and_then(|s| s.done_in.clone())
        .unwrap_or_else(|| panic!("client {client}: no conversation"));
    let stored = history(url, &conversation).await;
    assert_provider_valid(&stored, client);
    let users: Vec<(usize, &str)> = stored
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "user")
        .map(|(at, m)| (at, m["content"].as_str().unwrap_or("")))
        .collect();
    let mut next = users.iter().peekable();
    for message in sent.iter().filter(|s| s.belongs_to(&conversation)) {
        let Some(&&(at, _)) = next.peek().filter(|(_, text)| *text == message.text) else {
            assert_ne!(
                message.outcome,
                Outcome::Completed,
                "client {client}: acknowledged {:?} missing or out of order in {stored:#?}",
                message.text
            );
            continue;
        };
        next.next();
        assert_ne!(
            message.outcome,
            Outcome::Refused,
            "client {client}: {:?} was refused yet stored",
            message.text
        );
        if message.outcome == Outcome::Completed {
            assert_answered(&stored[at + 1..], client);
        }
    }
    assert!(
        next.peek().is_none(),
        "client {client}: stored messages nobody sent, or out of order: {stored:#?}"
    );
    stored
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == INTERRUPTED)
}

/// What follows a completed user message: the tool call, its result, the reply.
fn assert_answered(after: &[Value], client: usize) {
    let roles: Vec<&str> = after
        .iter()
        .take(3)
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        ["assistant", "tool", "assistant"],
        "client {client}: {after:#?}"
    );
    assert_eq!(after[0]["tool_calls"][0]["function"]["name"], "list_files");
    assert_eq!(after[2]["content"], REPLY, "client {client}");
}

/// A history every provider accepts: each assistant message's tool calls answered by tool
/// messages, in order, before anything else; no two user messages in a row; the last
/// message the assistant's.
fn assert_provider_valid(messages: &[Value], client: usize) {
    let mut unanswered: Vec<&Value> = Vec::new();
    let mut previous = "";
    for message in messages {
        let role = message["role"].as_str().unwrap_or("");
        match role {
            "tool" => {
                assert_eq!(
                    unanswered.first().copied(),
                    Some(&message["tool_call_id"]),
                    "client {client}: a tool message without its call: {messages:#?}"
                );
                unanswered.remove(0);
            }
            "user" | "assistant" => {
                assert!(
                    unanswered.is_empty(),
                    "client {client}: a call without its result: {messages:#?}"
                );
                assert!(
                    !(role == "user" && previous == "user"),
                    "client {client}: two user messages in a row: {messages:#?}"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    unanswered = calls.iter().map(|c| &c["id"]).collect();
                }
            }
            other => panic!("client {client}: a {other:?} message: {messages:#?}"),
        }
        previous = role;
    }
    assert!(unanswered.is_empty(), "client {client}: {messages:#?}");
    assert_eq!(previous, "assistant", "client {client}: {messages:#?}");
}

/// The stored messages of `conversation`.
async fn history(url: &str, conversation: &str) -> Vec<Value> {
    stored_messages_at(url, conversation).await
}

fn error_of(body: &str) -> String {
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    body["error"].as_str().unwrap_or_default().to_owned()
}
