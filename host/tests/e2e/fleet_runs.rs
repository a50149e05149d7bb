//! A run belongs to its conversation on every host of a fleet (docs/api.md, "Runs";
//! docs/deploy.md, "Several hosts"): two hosts on one PostgreSQL database behind nginx, a run
//! started on the first is followed from the second from any event on (nothing lost, nothing
//! twice), stopped from the second, read to its end from the second after its client left,
//! a client following on the second keeps it attended, and a follower on the second learns
//! it was lost when the first host dies mid-run, and the run's own end when the first host
//! is stopped gracefully. A client ahead of the store (it read an event on the first host
//! before the first host published it) is followed on the second until the store catches
//! up. A conversation compacted on one host goes
//! on on the other, and on a restarted one, with the summary kept (not asked of the model
//! again). With `[store] share_runs = false` a run is followed and stopped only on its own
//! host: the other answers as for a run it cannot see.

use std::time::Duration;

use serde_json::{json, Value};

use crate::several_hosts::Deployment;
use crate::support::{
    host::{chat_at, get_at, stop_at, HostConfig},
    ndjson::{read_until, Event, Stream},
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

/// The text of the `CHAT` events among `lines`.
fn chat_text(lines: &[Value]) -> String {
    lines
        .iter()
        .filter(|e| e["type"] == "CHAT")
        .map(|e| e["text"].as_str().expect("text"))
        .collect()
}

/// `GET url/conversations/{conversation}/events`, with `after` when given.
async fn events_at(url: &str, conversation: &str, after: Option<u64>) -> reqwest::Response {
    let query = after.map_or(String::new(), |n| format!("?after={n}"));
    get_at(url, &format!("/conversations/{conversation}/events{query}")).await
}

/// Two hosts on one database behind nginx, answering from `turns`, with `store` keys.
async fn deployment(turns: Vec<Turn>, store: &str) -> (Deployment, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins().upstream(&upstream);
    (Deployment::start_with_store(config, store), upstream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_host_is_followed_from_event_n_and_stopped_from_the_other() {
    let text = "word ".repeat(80);
    let slow = Turn::text_in_pieces(&text, 5).chunk_delay(Duration::from_millis(20));
    let never = Turn::text("never sent").first_delay(Duration::from_secs(60));
    let (deployment, upstream) = deployment(vec![slow, never], "").await;
    let [host_a, host_b] = deployment.urls.clone();

    // A client of host A reads the first piece of text, then its connection drops.
    let mut response = chat_at(
        &host_a,
        &json!({"projectId": "demo", "message": "talk slowly"}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let seen = read_until(&mut response, "\"CHAT\"").await;
    drop(response);
    let read = lines_read(&seen);
    assert_eq!(read[0]["type"], "RUN_STARTED", "{seen}");
    let conversation = read[0]["conversationId"].as_str().unwrap().to_owned();
    let last = read.last().unwrap()["seq"].as_u64().unwrap();

    // It rejoins on host B (and, through nginx, on whichever host answers) from where it left.
    let rest = Stream::read(events_at(&host_b, &conversation, Some(last)).await).await;
    assert_eq!(rest.seqs.0, last + 1, "the rest starts right after");
    assert_eq!(rest.started, None);
    assert_eq!(rest.done(), (conversation.clone(), "completed".to_owned()));
    assert_eq!(
        chat_text(&read) + &rest.text(),
        text,
        "nothing lost, nothing twice"
    );
    for _ in 0..2 {
        let through = events_at(&deployment.nginx.url, &conversation, Some(last)).await;
        let through = Stream::read(through).await;
        assert_eq!(through.seqs, rest.seqs);
        assert_eq!(through.text(), rest.text());
    }
    // From its start, on B: every event, in order, once.
    let whole = Stream::read(events_at(&host_b, &conversation, Some(0)).await).await;
    assert_eq!(whole.started_conversation(), conversation);
    assert_eq!(whole.seqs, (1, rest.seqs.1));
    assert_eq!(whole.text(), text);
    // Without `after`, only a run in progress is followed; past the last event is refused.
    assert_eq!(events_at(&host_b, &conversation, None).await.status(), 204);
    let past = events_at(&host_b, &conversation, Some(rest.seqs.1 + 1)).await;
    assert_eq!(past.status(), 400);
    assert_eq!(upstream.dropped(), 0, "the run was never cancelled");

    // The next message runs on A and waits for its model; B follows it and stops it.
    let body = json!({"projectId": "demo", "conversationId": conversation, "message": "again"});
    let mut on_a = chat_at(&host_a, &body).await;
    let first = read_until(&mut on_a, "\n").await;
    assert_eq!(lines_read(&first)[0]["type"], "RUN_STARTED");
    let following = events_at(&host_b, &conversation, None).await;
    assert_eq!(following.status(), 200, "B follows A's run in progress");
    let stopped = stop_at(&host_b, &conversation).await;
    assert_eq!(stopped.status(), 202, "{:?}", stopped.text().await);
    let on_b = Stream::read(following).await;
    assert_eq!(on_b.done(), (conversation.clone(), "cancelled".to_owned()));
    let rest_a = on_a.text().await.expect("A's stream ends");
    let on_a = Stream::parse(&(first + &rest_a));
    assert_eq!(on_a.done(), (conversation.clone(), "cancelled".to_owned()));
    assert_eq!(on_a.seqs.1, on_b.seqs.1, "both saw the same last event");
    // Nothing is left to stop, on either host.
    for url in [&host_a, &host_b] {
        assert_eq!(stop_at(url, &conversation).await.status(), 409);
    }
}

/// What `response` streams until nothing more comes for `quiet`.
async fn read_until_quiet(response: &mut reqwest::Response, quiet: Duration) -> String {
    let mut seen = String::new();
    while let Ok(chunk) = tokio::time::timeout(quiet, response.chunk()).await {
        match chunk.expect("the stream reads") {
            Some(bytes) => seen.push_str(std::str::from_utf8(&bytes).expect("UTF-8")),
            None => break,
        }
    }
    seen
}

/// The lines of an NDJSON body numbered past `after`, as JSON.
fn lines_after(body: &str, after: u64) -> Vec<Value> {
    lines_read(body)
        .into_iter()
        .filter(|line| line["seq"].as_u64().expect("a seq") > after)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_ahead_of_the_store_is_followed_on_the_other_host_until_the_store_catches_up() {
    let text = "word ".repeat(20);
    let held = Turn::text_in_pieces(&text, 5).held();
    let (deployment, upstream) = deployment(vec![held], "").await;
    let [host_a, host_b] = deployment.urls.clone();

    // Host A has given its client every event it has (the model's answer is held back), and
    // has published them: nothing comes for longer than a publish takes.
    let mut on_a = chat_at(&host_a, &json!({"projectId": "demo", "message": "go"})).await;
    assert_eq!(on_a.status(), 200);
    let seen = read_until_quiet(&mut on_a, Duration::from_millis(800)).await;
    let read = lines_read(&seen);
    let conversation = read[0]["conversationId"].as_str().unwrap().to_owned();
    let last = read.last().unwrap()["seq"].as_u64().unwrap();

    // A client that read one event more on host A than the store holds yet (host A publishes
    // a moment after its own clients read) rejoins on host B: it is followed, not refused.
    let ahead = events_at(&host_b, &conversation, Some(last + 1)).await;
    assert_eq!(ahead.status(), 200, "{:?}", ahead.text().await);
    // A client that claims an event the run never makes is followed too, and told at the end.
    let far_ahead = events_at(&host_b, &conversation, Some(last + 1_000)).await;
    assert_eq!(far_ahead.status(), 200);

    upstream.release();
    let rest_a = on_a.text().await.expect("A's stream ends");
    let whole_a = seen + &rest_a;
    assert_eq!(Stream::parse(&whole_a).done().1, "completed");
    let ahead = ahead.text().await.expect("B's stream ends");
    assert_eq!(
        Stream::parse(&ahead).seqs.0,
        last + 2,
        "right after the one it has"
    );
    assert_eq!(
        lines_read(&ahead),
        lines_after(&whole_a, last + 1),
        "B gives what A gave after that event: nothing lost, nothing twice"
    );
    let far_ahead = Stream::read(far_ahead).await;
    let errors = far_ahead.errors();
    assert!(
        errors.len() == 1 && errors[0].contains("is past the run's last event"),
        "{errors:?}"
    );
    assert_eq!(far_ahead.done().1, "internal_error");
    // Once the run has ended, its last event is final: a later event is refused at once.
    let past = events_at(&host_b, &conversation, Some(last + 1_000)).await;
    assert_eq!(past.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_client_left_finishes_and_the_other_host_reads_it_to_its_end() {
    let calls = Turn::tool_calls(&[(
        "w1",
        "write_text_content",
        json!({"path": "unattended.txt", "text": "written anyway"}),
    )])
    .first_delay(Duration::from_millis(300));
    let (deployment, _upstream) = deployment(vec![calls, Turn::text("done")], "").await;
    let [host_a, host_b] = deployment.urls.clone();
    let mut response = chat_at(
        &host_a,
        &json!({"projectId": "demo", "message": "write it"}),
    )
    .await;
    let seen = read_until(&mut response, "\n").await;
    drop(response);
    let conversation = lines_read(&seen)[0]["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();

    let whole = Stream::read(events_at(&host_b, &conversation, Some(0)).await).await;
    assert_eq!(whole.started_conversation(), conversation);
    assert_eq!(whole.done().1, "completed");
    assert_eq!(whole.text(), "done");
    assert_eq!(whole.results().len(), 1);
    assert!(whole.results()[0].1, "{whole:?}");
    let written = deployment.project_file("unattended.txt");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "written anyway");
    let history = get_at(
        &host_b,
        &format!("/conversations/{conversation}?projectId=demo"),
    )
    .await;
    let history: Vec<Value> = history.json().await.expect("the history");
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_following_on_another_host_keeps_the_run_attended() {
    // A run of about eight seconds on host A, whose client leaves at once; a run nobody
    // follows for three seconds is stopped. A client on B follows it to its end.
    let text = "word ".repeat(160);
    let slow = Turn::text_in_pieces(&text, 5).chunk_delay(Duration::from_millis(50));
    let upstream = ScriptedUpstream::start(vec![slow]).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[limits]\nunattended_run_secs = 3\n");
    let deployment = Deployment::start(config);
    let [host_a, host_b] = deployment.urls.clone();
    let mut response = chat_at(&host_a, &json!({"projectId": "demo", "message": "talk"})).await;
    let seen = read_until(&mut response, "\n").await;
    drop(response);
    let conversation = lines_read(&seen)[0]["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();

    let followed = Stream::read(events_at(&host_b, &conversation, Some(0)).await).await;
    assert_eq!(followed.done(), (conversation, "completed".to_owned()));
    assert_eq!(
        followed.text(),
        text,
        "the run was not stopped as unattended"
    );
    assert_eq!(upstream.dropped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_on_another_host_is_told_when_the_running_host_dies() {
    let never = Turn::text("never sent").first_delay(Duration::from_secs(120));
    // A short lease: a dead host's run is known lost after two seconds.
    let (mut deployment, _upstream) = deployment(vec![never], "run_lease_secs = 2\n").await;
    let [host_a, host_b] = deployment.urls.clone();
    let mut response = chat_at(&host_a, &json!({"projectId": "demo", "message": "hi"})).await;
    let seen = read_until(&mut response, "\n").await;
    let conversation = lines_read(&seen)[0]["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let following = events_at(&host_b, &conversation, Some(1)).await;
    assert_eq!(following.status(), 200, "B follows A's run");

    deployment.kill(0);
    drop(response);
    let body = tokio::time::timeout(Duration::from_secs(60), following.text())
        .await
        .expect("the follower is not left hanging")
        .expect("the stream ends cleanly");
    let lines = lines_read(&body);
    let events: Vec<Event> = body
        .lines()
        .map(|line| {
            crate::support::ndjson::event_of_line(line)
                .unwrap_or_else(|| panic!("a numbered event: {line}"))
        })
        .collect();
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (2..2 + seqs.len() as u64).collect::<Vec<_>>(),
        "{body}"
    );
    match &events[..] {
        [Event::Error { message }, Event::Done { stop_reason, .. }] => {
            assert!(message.contains("stopped before it ended"), "{message}");
            assert_eq!(stop_reason, "internal_error");
        }
        other => panic!("an ERROR and a DONE: {other:?}"),
    }
    // Nothing is left to stop; the conversation is B's to go on with once the lease passed.
    assert_eq!(stop_at(&host_b, &conversation).await.status(), 409);
}

/// The window the upstream enforces, in tokens of four bytes.
const WINDOW: usize = 8_192;

/// OpenAI's answer to a request over the window.
const OVERFLOW: &str = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

/// Sends message `n` to the host at `url` and checks it completed with the tool's result.
async fn ask(url: &str, conversation: Option<&str>, n: usize) -> Stream {
    let mut body =
        json!({"projectId": "demo", "message": format!("Message {n}: what is note.txt about?")});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let stream = Stream::read(chat_at(url, &body).await).await;
    assert_eq!(stream.errors(), Vec::<String>::new(), "message {n}");
    assert_eq!(stream.done().1, "completed", "message {n}");
    assert!(stream.results()[0].1, "message {n}: the note was read");
    stream
}

/// The summaries a stream's `CONTEXT_COMPACTED` events carry.
fn summaries(stream: &Stream) -> Vec<String> {
    stream
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ContextCompacted { summary, .. } => Some(summary.clone()),
            _ => None,
        })
        .collect()
}

/// The system message of the last model request that offered tools (a turn, not a summary).
fn last_turn_system(upstream: &ScriptedUpstream) -> String {
    upstream
        .received()
        .iter()
        .rev()
        .find(|r| r.body["tools"].is_array())
        .map(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .expect("a model turn")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_compacted_on_one_host_goes_on_on_the_other_with_the_kept_summary() {
    let upstream = ScriptedUpstream::start_windowed(
        WINDOW,
        (400, OVERFLOW),
        Turn::tool_calls(&[("call_read", "get_text_content", json!({"path": "note.txt"}))]),
        Turn::text("It is a note about kettles."),
    )
    .await;
    let config = HostConfig::builtins().upstream(&upstream).with(&format!(
        "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\ncontext_tokens = {WINDOW}\n"
    ));
    let mut deployment = Deployment::start(config);
    let note_path = deployment.project_file("note.txt");
    std::fs::create_dir_all(note_path.parent().unwrap()).unwrap();
    let note: String = (0..160)
        .map(|n| format!("Line {n:03}: kettles boil water for tea.\n"))
        .collect();
    std::fs::write(&note_path, note).unwrap();

    // Host A answers until the conversation is compacted once.
    let host_a = deployment.urls[0].clone();
    let conversation = ask(&host_a, None, 0).await.done().0;
    let mut n = 1;
    let mut made = Vec::new();
    while made.is_empty() {
        assert!(n < 30, "the conversation was never compacted");
        made = summaries(&ask(&host_a, Some(&conversation), n).await);
        n += 1;
    }
    // The summaries A asked of the model: B asks none again.
    let asked = upstream.summaries();
    let summary = made.pop().expect("a summary");

    // Host B goes on with the summary A kept, then a restarted B does.
    for restarted in [false, true] {
        if restarted {
            deployment.restart(1);
        }
        let host_b = deployment.urls[1].clone();
        let stream = ask(&host_b, Some(&conversation), n).await;
        n += 1;
        assert_eq!(summaries(&stream), Vec::<String>::new(), "message {n}");
        assert_eq!(
            upstream.summaries(),
            asked,
            "no summary was asked of the model again (restarted: {restarted})"
        );
        let system = last_turn_system(&upstream);
        assert!(
            system.contains(&summary),
            "B sent the summary A kept (restarted: {restarted}): {system:.300}"
        );
    }
    assert_eq!(upstream.over_window(), 0, "no request was over the window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_on_another_host_sees_the_end_of_a_run_its_host_stopped_gracefully() {
    let never = Turn::text("never sent").first_delay(Duration::from_secs(600));
    // A lease far longer than the wait below: the follower must not learn the end by the
    // feed's liveness time running out.
    let (mut deployment, _upstream) = deployment(vec![never], "run_lease_secs = 600\n").await;
    let [host_a, host_b] = deployment.urls.clone();
    let mut response = chat_at(&host_a, &json!({"projectId": "demo", "message": "hi"})).await;
    let seen = read_until(&mut response, "\n").await;
    let conversation = lines_read(&seen)[0]["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let following = events_at(&host_b, &conversation, Some(1)).await;
    assert_eq!(following.status(), 200, "B follows A's run");

    let exit = deployment.terminate(0);
    assert!(exit.success(), "host A exits cleanly: {exit:?}");
    drop(response);
    let body = tokio::time::timeout(Duration::from_secs(60), following.text())
        .await
        .expect("the follower is not left waiting for the lease to pass")
        .expect("the stream ends cleanly");
    let events: Vec<Event> = body
        .lines()
        .map(|line| {
            crate::support::ndjson::event_of_line(line)
                .unwrap_or_else(|| panic!("a numbered event: {line}"))
        })
        .collect();
    match &events[..] {
        [Event::Error { message }, Event::Done { stop_reason, .. }] => {
            assert!(message.contains("the server is shutting down"), "{message}");
            assert_eq!(stop_reason, "cancelled", "the run's own DONE: {body}");
        }
        other => panic!("the run's ERROR and DONE: {other:?}"),
    }
    // The run closed the history before its host exited: the other host goes on with it.
    let history = get_at(
        &host_b,
        &format!("/conversations/{conversation}?projectId=demo"),
    )
    .await;
    let history: Vec<Value> = history.json().await.expect("the history");
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_share_runs_off_a_run_is_followed_and_stopped_only_on_its_own_host() {
    let never = Turn::text("never sent").first_delay(Duration::from_secs(60));
    let (deployment, _upstream) = deployment(
        vec![Turn::text("first answer"), never],
        "share_runs = false\n",
    )
    .await;
    let [host_a, host_b] = deployment.urls.clone();

    // A finished run on A: B has none of its events, A has them all.
    let first = chat_at(&host_a, &json!({"projectId": "demo", "message": "hello"})).await;
    let first = Stream::read(first).await;
    let conversation = first.started_conversation();
    assert_eq!(first.done().1, "completed");
    assert_eq!(
        events_at(&host_b, &conversation, Some(0)).await.status(),
        204
    );
    let again = Stream::read(events_at(&host_a, &conversation, Some(0)).await).await;
    assert_eq!(again.text(), "first answer");

    // A run in progress on A: B neither follows nor stops it, A does both.
    let body = json!({"projectId": "demo", "conversationId": conversation, "message": "again"});
    let mut on_a = chat_at(&host_a, &body).await;
    let seen = read_until(&mut on_a, "\n").await;
    assert_eq!(lines_read(&seen)[0]["type"], "RUN_STARTED");
    for after in [None, Some(0)] {
        let on_b = events_at(&host_b, &conversation, after).await;
        assert_eq!(on_b.status(), 204, "B cannot see A's run (after={after:?})");
    }
    let refused = stop_at(&host_b, &conversation).await;
    assert_eq!(refused.status(), 409, "{:?}", refused.text().await);
    let following = events_at(&host_a, &conversation, None).await;
    assert_eq!(following.status(), 200, "A follows its own run");
    assert_eq!(stop_at(&host_a, &conversation).await.status(), 202);
    let followed = Stream::read(following).await;
    assert_eq!(
        followed.done(),
        (conversation.clone(), "cancelled".to_owned())
    );
    let rest = on_a.text().await.expect("A's stream ends");
    assert_eq!(Stream::parse(&(seen + &rest)).done().1, "cancelled");
}
