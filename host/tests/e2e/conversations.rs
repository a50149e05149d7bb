//! Conversations end to end: one run at a time in a conversation (`409` while a reply is
//! being written, the conversation continues normally afterwards, a disconnect and an
//! immediate retry never interleave), a full conversation refused with `422`, and
//! `GET /conversations/{id}` read page by page. Nothing is timed: slow upstream turns only
//! keep a run open while the test sends its second message.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    host::{stored_bytes, HostConfig, TestHost},
    ndjson::{read_until, Stream},
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

const BUSY: &str =
    "a reply is still being written in this conversation; wait for it to finish or stop it";

fn new_chat(text: &str) -> Value {
    json!({"projectId": "demo", "message": text})
}

fn continue_chat(conversation: &str, text: &str) -> Value {
    json!({"projectId": "demo", "conversationId": conversation, "message": text})
}

/// A text answer that streams for several seconds (one chunk a second), holding its run
/// open; each pause is well under the provider's idle time-out.
fn slow(text: &str) -> Turn {
    Turn::text(text).chunk_delay(Duration::from_secs(1))
}

/// `(role, content)` of each message.
fn turns_of(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
        .collect()
}

async fn error_of(response: reqwest::Response, status: u16) -> String {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    body["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_message_while_a_reply_is_written_gets_409_and_the_conversation_then_continues() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        slow("slow answer, written slowly"),
        Turn::text("other conversation"),
        Turn::text("third answer"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let first = Stream::read(host.chat(new_chat("first")).await).await;
    let (conversation, _) = first.done();

    let second = host.chat(continue_chat(&conversation, "second")).await;
    assert_eq!(second.status(), 200);
    upstream.until_received(2).await;
    let refused = host.chat(continue_chat(&conversation, "third")).await;
    assert_eq!(error_of(refused, 409).await, BUSY);
    // Another conversation is not held up by this one.
    let other = Stream::read(host.chat(new_chat("elsewhere")).await).await;
    assert_eq!(other.text(), "other conversation");
    assert_ne!(other.done().0, conversation);

    let second = Stream::read(second).await;
    assert_eq!(second.done().1, "completed");
    // The run released the conversation before `DONE`: the next message goes through at once.
    let third = Stream::read(host.chat(continue_chat(&conversation, "third")).await).await;
    assert_eq!(third.text(), "third answer");

    assert_eq!(
        upstream.received().len(),
        4,
        "the refused message started no run"
    );
    upstream.assert_consumed();
    let expected = pairs(&[
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second"),
        ("assistant", "slow answer, written slowly"),
        ("user", "third"),
        ("assistant", "third answer"),
    ]);
    assert_eq!(
        turns_of(&host.stored_messages(&conversation).await),
        expected
    );
    let last_request = &upstream.received()[3].body["messages"];
    let sent: Vec<Value> = last_request
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect();
    assert_eq!(turns_of(&sent), expected[..5]);
}

#[tokio::test]
async fn a_client_that_disconnects_and_retries_at_once_gets_409_or_a_complete_history() {
    // The second message's run is in a tool call (1.5 s) when its client goes away: the call
    // finishes and is stored, then the run closes the history. A retry in the meantime
    // must not start a run on the half-stored history.
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::tool_calls(&[("call_hang", "hang_tool", json!({"seconds": 1.5}))]),
        Turn::text("after the retry"),
    ])
    .await;
    let mut config = HostConfig::builtins()
        .upstream(&upstream)
        // Stopped as soon as its last client leaves.
        .with("[limits]\nunattended_run_secs = 0");
    config.load.push(plugin_lib("rojos_test_hang_tool"));
    let host = TestHost::start(config).await;
    let (conversation, _) = Stream::read(host.chat(new_chat("first")).await)
        .await
        .done();

    let mut second = host.chat(continue_chat(&conversation, "second")).await;
    assert_eq!(second.status(), 200);
    read_until(&mut second, "\"TOOL_CALL\"").await;
    drop(second);

    let mut refusals = 0;
    let retried = loop {
        let response = host.chat(continue_chat(&conversation, "retry")).await;
        if response.status() == 200 {
            break Stream::read(response).await;
        }
        assert_eq!(error_of(response, 409).await, BUSY);
        refusals += 1;
        assert!(refusals < 400, "the conversation stayed locked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(retried.text(), "after the retry");

    // The retried run saw the whole cancelled run: its tool step and its closing message.
    let expected = [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ];
    let sent = upstream.received()[2].body["messages"].clone();
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .filter(|r| *r != "system")
        .collect();
    assert_eq!(roles, expected);
    let history = host.stored_messages(&conversation).await;
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles[..7], expected);
    assert_eq!(history[6]["content"], "retry");
    assert_eq!(history.len(), 8);
}

#[tokio::test]
async fn a_full_conversation_refuses_new_messages_with_422_before_any_run() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text(&"n".repeat(6_000)),
        Turn::text("a fresh start"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with("[limits]\nmax_conversation_bytes = 65536"),
    )
    .await;
    // A message larger than the whole limit never starts a conversation's run.
    let too_long = host.chat(new_chat(&"b".repeat(70_000))).await;
    assert_eq!(
        error_of(too_long, 422).await,
        "this message (70028 bytes) does not fit in this conversation (0 of its 65536 bytes \
         used); send a shorter message or start a new conversation"
    );
    assert!(upstream.received().is_empty(), "no run started");
    // Under the limit when sent: accepted and answered; the answer fills the conversation.
    let long = "a".repeat(60_000);
    let (conversation, stop) = Stream::read(host.chat(new_chat(&long)).await).await.done();
    assert_eq!(stop, "completed");
    let messages = host.stored_messages(&conversation).await;
    let size = stored_bytes(&messages);
    assert!(size > 65536, "{size}");
    let listed: Vec<Value> = host
        .get("/conversations?projectId=demo")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["storedBytes"], json!(size));

    let refused = host.chat(continue_chat(&conversation, "one more")).await;
    assert_eq!(
        error_of(refused, 422).await,
        format!(
            "this conversation has reached its size limit ({size} bytes stored, limit 65536); \
             start a new conversation to continue"
        )
    );
    assert_eq!(upstream.received().len(), 1, "no run started");
    assert_eq!(
        host.stored_messages(&conversation).await.len(),
        2,
        "nothing stored"
    );

    let fresh = Stream::read(host.chat(new_chat("start over")).await).await;
    assert_eq!(fresh.text(), "a fresh start");
    upstream.assert_consumed();
}

#[tokio::test]
async fn pages_return_every_message_once_and_in_order_each_within_the_byte_cap() {
    const CAP: usize = 1024;
    let mut turns = Vec::new();
    let mut questions = Vec::new();
    for i in 0..8 {
        questions.push(format!("question {i} {}", "q".repeat(i * 97)));
        turns.push(Turn::text(&format!("answer {i} {}", "a".repeat(i * 61))));
    }
    questions.insert(4, format!("a long one {}", "l".repeat(3000)));
    turns.insert(4, Turn::text("long answer"));
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with(&format!("[limits]\nmax_conversation_page_bytes = {CAP}")),
    )
    .await;
    let (conversation, _) = Stream::read(host.chat(new_chat(&questions[0])).await)
        .await
        .done();
    for question in &questions[1..] {
        let body = continue_chat(&conversation, question);
        Stream::read(host.chat(body).await).await;
    }

    let mut all = Vec::new();
    let mut path = format!("/conversations/{conversation}");
    let mut pages = 0;
    loop {
        let response = host.get(&path).await;
        assert_eq!(response.status(), 200);
        let link = response
            .headers()
            .get("link")
            .map(|v| v.to_str().unwrap().to_owned());
        let next = response
            .headers()
            .get("rojos-next-from")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.bytes().await.unwrap();
        let page: Vec<Value> = serde_json::from_slice(&body).unwrap();
        assert!(!page.is_empty());
        assert!(
            body.len() <= CAP || page.len() == 1,
            "{path}: {} bytes in {} messages",
            body.len(),
            page.len()
        );
        pages += 1;
        all.extend(page);
        match (next, link) {
            (Some(next), Some(link)) => {
                assert_eq!(
                    next,
                    all.len().to_string(),
                    "the next page starts after this one"
                );
                path = format!("/conversations/{conversation}?from={next}");
                assert_eq!(link, format!("<{path}>; rel=\"next\""));
            }
            (None, None) => break,
            other => panic!("Link and Rojos-Next-From disagree: {other:?}"),
        }
    }

    let mut expected = Vec::new();
    for (i, question) in questions.iter().enumerate() {
        expected.push(("user".to_owned(), question.clone()));
        let answer = match i {
            4 => "long answer".to_owned(),
            _ => {
                let n = if i > 4 { i - 1 } else { i };
                format!("answer {n} {}", "a".repeat(n * 61))
            }
        };
        expected.push(("assistant".to_owned(), answer));
    }
    assert_eq!(turns_of(&all), expected);
    assert!(pages > 4, "{pages} pages");

    let past: Vec<Value> = host
        .get(&format!("/conversations/{conversation}?from=1000"))
        .await
        .json()
        .await
        .unwrap();
    assert!(past.is_empty());
    for bad in ["abc", "-1"] {
        let response = host
            .get(&format!("/conversations/{conversation}?from={bad}"))
            .await;
        assert_eq!(response.status(), 400, "from={bad}");
    }
}
