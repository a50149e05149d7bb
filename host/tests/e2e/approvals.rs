//! Approvals (`docs/api.md`, "Approvals"): a rojo whose `approve` names `write_text_content`
//! asks before each write (`APPROVAL_REQUIRED`), and the decision sent to
//! `POST /conversations/{id}/approvals/{callId}` runs it, runs it and every later write of
//! the conversation, or denies it (the model gets the reason, the file stays as it was).
//! Unanswered calls are denied after `[limits] approval_timeout_secs`; a client that leaves
//! while a call waits cancels the run (the call is not run, the history is closed, the
//! conversation free), and so does a server shutting down. Every decision is in the stored history's `rojos` note, which no
//! provider is sent. The decision through a second host on one PostgreSQL database is in
//! `hosts.rs`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::{Event, Stream},
    upstream::{ScriptedUpstream, Turn},
};

/// The rojo of these tests: every tool, writes need approval.
pub(crate) const APPROVING_ROJO: &str = "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\n\
                              approve = [\"write_text_content\"]\n";

async fn approving_host(turns: Vec<Turn>, extra: &str) -> (TestHost, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with(APPROVING_ROJO)
        .with(extra);
    (TestHost::start(config).await, upstream)
}

fn write_call(id: &str, path: &str, text: &str) -> (String, String, Value) {
    (
        id.to_owned(),
        "write_text_content".to_owned(),
        json!({"path": path, "text": text}),
    )
}

fn calls(list: &[(String, String, Value)]) -> Turn {
    let borrowed: Vec<(&str, &str, Value)> = list
        .iter()
        .map(|(i, n, a)| (i.as_str(), n.as_str(), a.clone()))
        .collect();
    Turn::tool_calls(&borrowed)
}

/// A chat whose stream is read event by event, to answer while it waits.
pub(crate) struct OpenChat {
    response: reqwest::Response,
    /// Everything read so far.
    seen: String,
    /// The conversation, as the last `APPROVAL_REQUIRED` named it.
    pub(crate) conversation: Option<String>,
    /// The approval id the last `APPROVAL_REQUIRED` gave.
    pub(crate) approval_id: Option<String>,
}

impl OpenChat {
    async fn start(host: &TestHost, body: Value) -> OpenChat {
        OpenChat::start_at(&host.url, body).await
    }

    /// A chat through the server at `url` (a test host or a running binary).
    pub(crate) async fn start_at(url: &str, body: Value) -> OpenChat {
        let response = crate::support::host::chat_at(url, &body).await;
        assert_eq!(response.status(), 200);
        OpenChat {
            response,
            seen: String::new(),
            conversation: None,
            approval_id: None,
        }
    }

    /// Reads until the `n`-th (1-based) complete `APPROVAL_REQUIRED` line and returns it.
    pub(crate) async fn approval_required(&mut self, n: usize) -> (String, String, Value) {
        loop {
            let asked: Vec<Event> = self
                .seen
                .split_inclusive('\n')
                .filter(|line| line.ends_with('\n'))
                .filter_map(crate::support::ndjson::event_of_line)
                .filter(|e| matches!(e, Event::ApprovalRequired { .. }))
                .collect();
            if let Some(Event::ApprovalRequired {
                id,
                approval_id,
                name,
                args,
                conversation_id,
            }) = asked.get(n - 1)
            {
                self.conversation = Some(conversation_id.clone());
                self.approval_id.clone_from(approval_id);
                return (id.clone(), name.clone(), args.clone());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("an event within 20 s")
                .expect("the stream goes on")
                .unwrap_or_else(|| panic!("the stream ended before approval {n}: {}", self.seen));
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The whole stream, checked as docs/api.md says; it must end within a minute (far
    /// longer than a decision takes to reach the run, far shorter than the default
    /// `approval_timeout_secs`).
    pub(crate) async fn finish(mut self) -> Stream {
        let rest = tokio::time::timeout(Duration::from_secs(60), self.response.text())
            .await
            .expect("the run ends within 60 s of the decision")
            .expect("the rest of the stream");
        self.seen.push_str(&rest);
        Stream::parse(&self.seen)
    }
}

/// `POST /conversations/{id}/approvals/{call}` with `token` (none: no header) and `body`:
/// the status and JSON body.
pub(crate) async fn decide_at(
    url: &str,
    token: Option<&str>,
    conversation: &str,
    call: &str,
    body: Value,
) -> (u16, Value) {
    let mut request = client()
        .post(format!(
            "{url}/conversations/{conversation}/approvals/{call}"
        ))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the host answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn decide(host: &TestHost, conversation: &str, call: &str, body: Value) -> (u16, Value) {
    decide_at(&host.url, Some(TOKEN), conversation, call, body).await
}

/// Asserts an endpoint's answer: its status, and an error message that says `says`.
fn assert_error(status: u16, body: &Value, expected: u16, says: &str) {
    assert_eq!(status, expected, "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{body}");
}

/// The stored `tool` messages of a conversation.
fn tool_messages(history: &[Value]) -> Vec<Value> {
    history
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// The `tool` messages the upstream received in its `n`-th request (0-based).
fn sent_tool_messages(upstream: &ScriptedUpstream, n: usize) -> Vec<Value> {
    upstream.received()[n].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

#[tokio::test]
async fn an_approved_call_runs_and_the_history_records_the_decision() {
    let (host, upstream) = approving_host(
        vec![
            calls(&[write_call("call_1", "a.txt", "hello")]),
            Turn::text("written"),
        ],
        "",
    )
    .await;
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "write"})).await;
    let (id, name, args) = chat.approval_required(1).await;
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("call_1", "write_text_content")
    );
    assert_eq!(args, json!({"path": "a.txt", "text": "hello"}));
    assert!(
        !host.project_root("demo").join("a.txt").exists(),
        "nothing runs before the decision"
    );
    let conversation = host.only_conversation().await;
    assert_eq!(chat.conversation.as_deref(), Some(conversation.as_str()));
    let (status, body) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let approval = chat
        .approval_id
        .clone()
        .expect("the event gives an approval id");
    assert_eq!(
        body,
        json!({"approvalId": approval, "callId": "call_1", "decision": "approve"})
    );

    let stream = chat.finish().await;
    assert_eq!(stream.done().1, "completed");
    assert_eq!(
        stream.results(),
        vec![(
            "write_text_content".to_owned(),
            true,
            r#"{"ok":true}"#.to_owned()
        )]
    );
    assert_eq!(
        std::fs::read_to_string(host.project_root("demo").join("a.txt")).unwrap(),
        "hello"
    );
    let stored = tool_messages(&host.stored_messages(&conversation).await);
    assert_eq!(
        stored[0]["rojos"],
        json!({"approval": {"decision": "approve"}})
    );
    let sent = sent_tool_messages(&upstream, 1);
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].get("rojos").is_none(),
        "the note is never sent upstream: {sent:?}"
    );

    // Decided once: a second decision changes nothing, by call id or by approval id.
    for key in ["call_1", approval.as_str()] {
        let (status, body) = decide(&host, &conversation, key, json!({"decision": "deny"})).await;
        assert_error(status, &body, 409, "already decided (approve)");
    }
}

#[tokio::test]
async fn approve_always_runs_later_calls_of_the_tool_in_later_runs_without_asking() {
    let (host, upstream) = approving_host(
        vec![
            calls(&[write_call("call_1", "a.txt", "one")]),
            Turn::text("first"),
            calls(&[write_call("call_2", "b.txt", "two")]),
            Turn::text("second"),
        ],
        "",
    )
    .await;
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "one"})).await;
    chat.approval_required(1).await;
    let conversation = host.only_conversation().await;
    let (status, body) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "approve_always"}),
    )
    .await;
    assert_eq!((status, &body["decision"]), (200, &json!("approve_always")));
    assert_eq!(chat.finish().await.done().1, "completed");

    let later = Stream::read(
        host.chat(json!({"projectId": "demo", "conversationId": conversation, "message": "two"}))
            .await,
    )
    .await;
    assert!(
        !later
            .all
            .iter()
            .any(|e| matches!(e, Event::ApprovalRequired { .. })),
        "not asked again: {:?}",
        later.all
    );
    assert!(later.results()[0].1);
    assert_eq!(
        std::fs::read_to_string(host.project_root("demo").join("b.txt")).unwrap(),
        "two"
    );
    let stored = tool_messages(&host.stored_messages(&conversation).await);
    assert_eq!(
        stored[0]["rojos"],
        json!({"approval": {"decision": "approve_always"}})
    );
    assert!(
        stored[1].get("rojos").is_none(),
        "the second call was not asked"
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_denied_call_is_not_run_and_the_model_gets_the_reason() {
    let (host, upstream) = approving_host(
        vec![
            calls(&[write_call("call_1", "keep.txt", "overwritten")]),
            Turn::text("understood"),
        ],
        "",
    )
    .await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("keep.txt"), "original").unwrap();
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "go"})).await;
    chat.approval_required(1).await;
    let conversation = host.only_conversation().await;
    let (status, body) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "deny", "reason": "  that file is mine "}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reason"], "that file is mine");

    let stream = chat.finish().await;
    let expected = "error: denied by the user: that file is mine";
    assert_eq!(
        stream.results(),
        vec![("write_text_content".to_owned(), false, expected.to_owned())]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("keep.txt")).unwrap(),
        "original"
    );
    let sent = sent_tool_messages(&upstream, 1);
    assert_eq!(sent[0]["content"], expected, "the model is told why");
    assert!(sent[0].get("rojos").is_none());
    let stored = tool_messages(&host.stored_messages(&conversation).await);
    assert_eq!(
        stored[0]["rojos"],
        json!({"approval": {"decision": "deny", "reason": "that file is mine"}})
    );
}

#[tokio::test]
async fn calls_of_one_turn_are_asked_one_after_the_other_in_order() {
    let (host, _upstream) = approving_host(
        vec![
            calls(&[
                write_call("call_1", "first.txt", "1"),
                write_call("call_2", "second.txt", "2"),
            ]),
            Turn::text("done"),
        ],
        "",
    )
    .await;
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "go"})).await;
    assert_eq!(chat.approval_required(1).await.0, "call_1");
    let conversation = host.only_conversation().await;
    let (status, body) = decide(
        &host,
        &conversation,
        "call_2",
        json!({"decision": "approve"}),
    )
    .await;
    assert_error(status, &body, 409, "no approval was asked");
    assert_eq!(
        decide(
            &host,
            &conversation,
            "call_1",
            json!({"decision": "approve"})
        )
        .await
        .0,
        200
    );
    assert_eq!(chat.approval_required(2).await.0, "call_2");
    assert_eq!(
        decide(&host, &conversation, "call_2", json!({"decision": "deny"}))
            .await
            .0,
        200
    );
    let stream = chat.finish().await;
    let results: Vec<(bool, String)> = stream
        .results()
        .into_iter()
        .map(|(_, ok, text)| (ok, text))
        .collect();
    assert_eq!(
        results,
        vec![
            (true, r#"{"ok":true}"#.to_owned()),
            (false, "error: denied by the user".to_owned())
        ]
    );
    assert!(host.project_root("demo").join("first.txt").exists());
    assert!(!host.project_root("demo").join("second.txt").exists());
}

#[tokio::test]
async fn an_unanswered_call_is_denied_after_the_time_out() {
    let (host, upstream) = approving_host(
        vec![
            calls(&[write_call("call_1", "a.txt", "x")]),
            Turn::text("ok"),
        ],
        "[limits]\napproval_timeout_secs = 1\n",
    )
    .await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "go"}))
            .await,
    )
    .await;
    assert!(stream
        .all
        .iter()
        .any(|e| matches!(e, Event::ApprovalRequired { .. })));
    let (_, ok, result) = &stream.results()[0];
    assert!(!ok);
    assert!(result.contains("did not answer within 1 s"), "{result}");
    assert!(!host.project_root("demo").join("a.txt").exists());
    let conversation = stream.done().0;
    let stored = tool_messages(&host.stored_messages(&conversation).await);
    assert_eq!(
        stored[0]["rojos"],
        json!({"approval": {"decision": "timeout"}})
    );
    assert_eq!(sent_tool_messages(&upstream, 1)[0]["content"], *result);
    let (status, body) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "approve"}),
    )
    .await;
    assert_error(status, &body, 409, "nobody answered in time");
}

#[tokio::test]
async fn a_client_that_leaves_while_a_call_waits_cancels_the_run() {
    // The setting that stops a run as soon as its last client leaves.
    let (host, upstream) = approving_host(
        vec![
            calls(&[write_call("call_1", "a.txt", "x")]),
            Turn::text("after the stop"),
        ],
        "[limits]\nunattended_run_secs = 0",
    )
    .await;
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "go"})).await;
    chat.approval_required(1).await;
    let conversation = host.only_conversation().await;
    drop(chat);

    let history = host.closed_history(&conversation).await;
    let tools = tool_messages(&history);
    assert_eq!(tools[0]["content"], "error: not run: the run was cancelled");
    assert_eq!(
        tools[0]["rojos"],
        json!({"approval": {"decision": "cancelled"}})
    );
    assert!(!host.project_root("demo").join("a.txt").exists());
    let (status, body) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "approve"}),
    )
    .await;
    assert_error(status, &body, 409, "run stopped");
    assert!(
        !host.project_root("demo").join("a.txt").exists(),
        "a late approval runs nothing"
    );

    // The lease is free: the next message runs.
    let next = Stream::read(
        host.chat(json!({"projectId": "demo", "conversationId": conversation, "message": "again"}))
            .await,
    )
    .await;
    assert_eq!(next.done().1, "completed");
    assert_eq!(next.text(), "after the stop");
    upstream.assert_consumed();
}

#[tokio::test]
async fn the_endpoint_refuses_what_it_cannot_decide() {
    let (host, _upstream) =
        approving_host(vec![Turn::text("hi demo"), Turn::text("hi other")], "").await;
    let demo = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "hi"}))
            .await,
    )
    .await
    .done()
    .0;
    let other = Stream::read(
        host.chat(json!({"projectId": "other", "message": "hi"}))
            .await,
    )
    .await
    .done()
    .0;
    let approve = json!({"decision": "approve"});
    let url = &host.url;

    let (status, _) = decide_at(url, None, &demo, "call_1", approve.clone()).await;
    assert_eq!(status, 401);
    let (status, _) = decide_at(url, Some("wrong"), &demo, "call_1", approve.clone()).await;
    assert_eq!(status, 401);
    let (status, body) = decide_at(url, Some(DEMO_TOKEN), &other, "call_1", approve.clone()).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = decide(&host, "NoSuchConversation", "call_1", approve.clone()).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = decide(&host, "bad%20id", "call_1", approve.clone()).await;
    assert_eq!(status, 400, "{body}");
    for (wrong, says) in [
        (json!({"decision": "maybe"}), "unknown decision"),
        (
            json!({"decision": "approve", "reason": "x"}),
            "only with \"deny\"",
        ),
        (
            json!({"decision": "deny", "reason": "x".repeat(501)}),
            "over the limit",
        ),
        (json!({"decision": "deny", "extra": 1}), "extra"),
        (json!({"reason": "no decision"}), "decision"),
    ] {
        let (status, body) = decide(&host, &demo, "call_1", wrong.clone()).await;
        assert_eq!(status, 400, "{wrong}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{wrong}: {body}"
        );
    }
    let (status, body) = decide(&host, &demo, "call_1", approve.clone()).await;
    assert_error(status, &body, 409, "no approval was asked");
    let (status, _) = decide_at(url, Some(DEMO_TOKEN), &demo, "call_1", approve).await;
    assert_eq!(
        status, 409,
        "the demo token may decide in demo's conversations"
    );
}

#[tokio::test]
async fn a_server_shutting_down_while_a_call_waits_does_not_run_it() {
    let upstream = ScriptedUpstream::start(vec![
        calls(&[write_call("call_1", "a.txt", "x")]),
        Turn::text("after the restart"),
    ])
    .await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with(APPROVING_ROJO);
    let host = TestHost::start(config.clone()).await;
    let mut chat = OpenChat::start(&host, json!({"projectId": "demo", "message": "go"})).await;
    chat.approval_required(1).await;
    let conversation = chat.conversation.clone().expect("named by the event");
    let finishing = tokio::spawn(chat.finish());

    let host = host.restart(config).await;

    let stream = finishing.await.expect("the stream is read");
    assert_eq!(stream.done().1, "cancelled");
    assert!(
        stream.errors().iter().any(|e| e.contains("shutting down")),
        "{:?}",
        stream.errors()
    );
    assert!(!host.project_root("demo").join("a.txt").exists());
    let history = host.closed_history(&conversation).await;
    let tools = tool_messages(&history);
    assert_eq!(tools[0]["content"], "error: not run: the run was cancelled");
    assert_eq!(
        tools[0]["rojos"],
        json!({"approval": {"decision": "cancelled"}})
    );
    let (status, _) = decide(
        &host,
        &conversation,
        "call_1",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 409, "the restarted host knows the call is over");
}
