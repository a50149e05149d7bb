//! A run belongs to its conversation, not to the request that started it: the stream's first
//! event names the conversation, every event is numbered, a client that leaves does not end
//! the run, any client rejoins it from where it left off
//! (`GET /conversations/{id}/events?after=N`), stop is an explicit request
//! (`POST /conversations/{id}/stop`), and a run nobody follows stops after
//! `[limits] unattended_run_secs` (docs/api.md, "Runs").

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    demo_message as message,
    host::{HostConfig, TestHost},
    ndjson::{read_until, Stream},
    upstream::{ScriptedUpstream, Turn},
};

/// The complete lines of what a client read before it left, as JSON.
fn lines_read(seen: &str) -> Vec<Value> {
    let complete = &seen[..seen.rfind('\n').map_or(0, |end| end + 1)];
    complete
        .lines()
        .map(|line| serde_json::from_str(line).expect("an event line"))
        .collect()
}

/// Waits (generously) until the upstream saw `count` responses dropped mid-stream.
async fn until_dropped(upstream: &ScriptedUpstream, count: usize) {
    for _ in 0..400 {
        if upstream.dropped() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        upstream.dropped(),
        count,
        "the upstream request was dropped"
    );
}

async fn host_with(turns: Vec<Turn>, limits: &str) -> (TestHost, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with(&format!("[limits]\n{limits}"));
    (TestHost::start(config).await, upstream)
}

#[tokio::test]
async fn a_client_that_leaves_rejoins_its_run_where_it_left_off() {
    let text = "word ".repeat(60);
    let slow = Turn::text_in_pieces(&text, 5).chunk_delay(Duration::from_millis(20));
    let (host, upstream) = host_with(vec![slow], "").await;
    let mut response = host.chat(message("talk slowly")).await;
    let seen = read_until(&mut response, "\"CHAT\"").await;
    drop(response);

    let read = lines_read(&seen);
    assert_eq!(read[0]["type"], "RUN_STARTED", "{seen}");
    assert_eq!(read[0]["rojo"], "default");
    let conversation = read[0]["conversationId"].as_str().unwrap().to_owned();
    let last = read.last().unwrap()["seq"].as_u64().unwrap();
    let before: String = read
        .iter()
        .filter(|e| e["type"] == "CHAT")
        .map(|e| e["text"].as_str().unwrap())
        .collect();

    let rejoined = host
        .get(&format!(
            "/conversations/{conversation}/events?after={last}"
        ))
        .await;
    let rest = Stream::read(rejoined).await;
    assert_eq!(rest.seqs.0, last + 1, "the rest starts right after");
    assert_eq!(rest.started, None);
    assert_eq!(rest.done(), (conversation.clone(), "completed".to_owned()));
    assert_eq!(before + &rest.text(), text, "nothing lost, nothing twice");

    // Another client follows the same run from its start.
    let whole = host
        .get(&format!("/conversations/{conversation}/events?after=0"))
        .await;
    let whole = Stream::read(whole).await;
    assert_eq!(whole.started_conversation(), conversation);
    assert_eq!(whole.text(), text);
    assert_eq!(whole.seqs.1, rest.seqs.1);
    // Without `after`, only a run in progress is followed.
    let ended = host
        .get(&format!("/conversations/{conversation}/events"))
        .await;
    assert_eq!(ended.status(), 204);

    assert_eq!(upstream.dropped(), 0, "the run was never cancelled");
    let stored = host.closed_history(&conversation).await;
    assert_eq!(stored.last().unwrap()["content"], text.as_str());
}

#[tokio::test]
async fn a_run_whose_client_left_at_once_finishes_its_work() {
    let calls = Turn::tool_calls(&[(
        "w1",
        "write_text_content",
        json!({"path": "unattended.txt", "text": "written anyway"}),
    )])
    .first_delay(Duration::from_millis(300));
    let (host, _upstream) = host_with(vec![calls, Turn::text("done")], "").await;
    drop(host.chat(message("write it")).await);

    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    let roles: Vec<&str> = stored.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant"],
        "{stored:?}"
    );
    assert_eq!(stored[3]["content"], "done");
    let written = host.project_root("demo").join("unattended.txt");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "written anyway");
}

#[tokio::test]
async fn stop_is_an_explicit_request_that_every_follower_sees() {
    let slow = Turn::text("never sent").first_delay(Duration::from_secs(30));
    let (host, upstream) = host_with(vec![slow], "").await;
    let mut response = host.chat(message("hi")).await;
    let seen = read_until(&mut response, "\n").await;
    let conversation = lines_read(&seen)[0]["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let follower = host
        .get(&format!("/conversations/{conversation}/events"))
        .await;

    let stopped = host.stop_run(&conversation).await;
    assert_eq!(stopped.status(), 202);
    let rest = response.text().await.unwrap();
    assert!(
        rest.ends_with("\"stopReason\":\"cancelled\",\"seq\":2}\n"),
        "{rest}"
    );
    let followed = Stream::read(follower).await;
    assert_eq!(
        followed.done(),
        (conversation.clone(), "cancelled".to_owned())
    );
    until_dropped(&upstream, 1).await;

    let stored = host.closed_history(&conversation).await;
    assert_eq!(
        stored.last().unwrap()["content"],
        "(no answer: the run was stopped)"
    );
    let again = host.stop_run(&conversation).await;
    assert_eq!(again.status(), 409);
    let body: Value = again.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("nothing to stop"),
        "{body}"
    );
}

#[tokio::test]
async fn a_run_nobody_follows_stops_after_unattended_run_secs() {
    let slow = Turn::text("never sent").first_delay(Duration::from_secs(30));
    let (host, upstream) = host_with(vec![slow], "unattended_run_secs = 0.5").await;
    drop(host.chat(message("hi")).await);
    until_dropped(&upstream, 1).await;
    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    assert_eq!(
        stored.last().unwrap()["content"],
        "(no answer: the run was stopped: nobody followed it)"
    );
}

#[tokio::test]
async fn rejoining_asks_for_a_conversation_the_caller_may_see_and_a_number_the_run_gave() {
    let (host, _upstream) = host_with(vec![Turn::text("hello")], "").await;
    let (conversation, _) = Stream::read(host.chat(message("hi")).await).await.done();
    let past = host
        .get(&format!("/conversations/{conversation}/events?after=99"))
        .await;
    assert_eq!(past.status(), 400);
    let body: Value = past.json().await.unwrap();
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("past the run's last event"));
    let missing = host.get("/conversations/nosuchconversation/events").await;
    assert_eq!(missing.status(), 404);
}
