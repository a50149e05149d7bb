//! `POST /chat` end to end: the real host and plugins against a scripted upstream on
//! loopback. The reference conversation, tool-call failures of every kind, the step limit,
//! repeated calls, provider failures, client disconnects, follow-ups and restarts, and turn
//! shapes the fixtures lack (text with a call, index-less calls with split arguments).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    builtins_host_with as host_with, demo_message as message,
    host::{HostConfig, TestHost},
    ndjson::{read_until, Event, Stream},
    plugin_lib,
    upstream::{ScriptedUpstream, Turn},
};

use crate::support::seed::{self, MESSAGE as SEED, PAGE};

fn seed_turns() -> Vec<Turn> {
    seed::turns()
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

/// A host like `host_with`'s that stops a run as soon as its last client leaves
/// (`unattended_run_secs = 0`, the behaviour of servers before runs outlived their request).
async fn host_stopping_unfollowed_runs(turns: Vec<Turn>) -> (TestHost, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with(STOP_UNFOLLOWED);
    (TestHost::start(config).await, upstream)
}

/// The `[limits]` key that stops a run as soon as its last client leaves.
const STOP_UNFOLLOWED: &str = "[limits]\nunattended_run_secs = 0";

/// Waits (generously) until the upstream saw `count` responses dropped mid-stream.
async fn until_dropped(upstream: &ScriptedUpstream, count: usize) {
    for _ in 0..200 {
        if upstream.dropped() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        upstream.dropped(),
        count,
        "the upstream saw its response dropped mid-stream"
    );
}

#[tokio::test]
async fn the_seed_conversation_creates_the_page_and_streams_every_step() {
    let (host, upstream) = host_with(seed_turns()).await;
    let stream = Stream::read(host.chat(message(SEED)).await).await;

    assert_eq!(
        stream.calls(),
        vec![
            ("create_directory".to_owned(), json!({"path": "docs/intro"})),
            (
                "write_text_content".to_owned(),
                json!({"path": "docs/intro/index.page", "text": PAGE})
            ),
        ]
    );
    assert_eq!(
        stream.results(),
        vec![
            (
                "create_directory".to_owned(),
                true,
                r#"{"ok":true}"#.to_owned()
            ),
            (
                "write_text_content".to_owned(),
                true,
                r#"{"ok":true}"#.to_owned()
            ),
        ]
    );
    assert_eq!(
        stream.text(),
        "Done! I created `docs/intro` and wrote `docs/intro/index.page`."
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "completed");
    assert!(stream.errors().is_empty());
    let written =
        std::fs::read_to_string(host.project_root("demo").join("docs/intro/index.page")).unwrap();
    assert_eq!(written, PAGE);

    // What the provider received: the same consistent history, growing turn by turn.
    upstream.assert_consumed();
    let requests = upstream.received();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["model"], "scripted-model");
        let tools: Vec<&str> = request.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools.len(), 5, "{tools:?}");
    }
    let last = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(
        roles(last),
        ["user", "assistant", "tool", "assistant", "tool"]
    );
    assert_eq!(last[0]["content"], SEED);
    assert_eq!(last[1]["tool_calls"][0]["id"], "call_mkdir");
    assert_eq!(
        last[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"docs/intro"}"#
    );
    assert_eq!(last[2]["tool_call_id"], "call_mkdir");
    assert_eq!(last[2]["content"], r#"{"ok":true}"#);
    assert_eq!(last[4]["tool_call_id"], "call_write");
    assert_eq!(
        requests[1].body["messages"].as_array().unwrap()[..3],
        last[..3]
    );

    // The stored conversation is that history plus the final answer.
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(
        roles(&stored),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(&stored[..5], &last[..]);
    assert_eq!(
        stored[5]["content"],
        "Done! I created `docs/intro` and wrote `docs/intro/index.page`."
    );
}

#[tokio::test]
async fn a_follow_up_message_sends_the_whole_conversation() {
    let (host, upstream) = host_with(seed_turns()).await;
    let first = Stream::read(host.chat(message(SEED)).await).await;
    let (conversation, _) = first.done();
    upstream.push([Turn::text("It has a header and one paragraph.")]);
    let second = Stream::read(
        host.chat(json!({"projectId": "demo", "conversationId": conversation, "message": "What is in it?"}))
            .await,
    )
    .await;
    assert_eq!(second.done().0, conversation);
    let request = &upstream.received()[3];
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(
        roles(messages),
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_eq!(messages[6]["content"], "What is in it?");
}

#[tokio::test]
async fn a_conversation_survives_a_restart() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("Hello!")]).await;
    let config = HostConfig::builtins().upstream(&upstream);
    let host = TestHost::start(config.clone()).await;
    let (conversation, _) = Stream::read(host.chat(message("hi")).await).await.done();
    let host = host.restart(config).await;
    upstream.push([Turn::text("Still here.")]);
    let stream = Stream::read(
        host.chat(
            json!({"projectId": "demo", "conversationId": conversation, "message": "still there?"}),
        )
        .await,
    )
    .await;
    assert_eq!(stream.text(), "Still here.");
    let messages = upstream.received()[1].body["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "still there?"}
        ])
    );
}

#[tokio::test]
async fn failing_unknown_and_malformed_calls_become_error_results_the_model_sees() {
    let turns = vec![
        Turn::raw_tool_calls(&[
            ("c1", "get_text_content", r#"{"path":"missing.txt"}"#),
            ("c2", "delete_everything", r#"{}"#),
            ("c3", "list_files", r#"{"path": "."#),
            ("c4", "list_files", r#"{"path": ".", "recursive": true}"#),
            ("c5", "get_text_content", r#"{"path":"/etc/passwd"}"#),
        ]),
        Turn::text("Sorry, none of that worked."),
    ];
    let (host, upstream) = host_with(turns).await;
    let stream = Stream::read(host.chat(message("try things")).await).await;
    let results = stream.results();
    assert_eq!(results.len(), 5);
    assert!(
        results
            .iter()
            .all(|(_, ok, result)| !ok && result.starts_with("error: ")),
        "{results:#?}"
    );
    assert!(results[0].2.contains("missing.txt"), "{}", results[0].2);
    assert!(results[1].2.contains("unknown tool \"delete_everything\"; available tools: create_directory, get_text_content"), "{}", results[1].2);
    assert!(
        results[2].2.contains("the tool was not run"),
        "{}",
        results[2].2
    );
    assert!(results[3].2.contains("recursive"), "{}", results[3].2);
    assert!(
        !results[4].2.contains("root:"),
        "no outside content: {}",
        results[4].2
    );
    // The malformed call's raw text is shown to the client as a string.
    assert_eq!(stream.calls()[2].1, json!(r#"{"path": "."#));
    assert_eq!(stream.done().1, "completed");
    // The model was given each error as the tool message, in order.
    let messages = upstream.received()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 5);
    for (message, (_, _, result)) in tool_messages.iter().zip(&results) {
        assert_eq!(message["content"], result.as_str());
    }
    // The assistant message always carries valid JSON object arguments.
    assert_eq!(messages[1]["tool_calls"][2]["function"]["arguments"], "{}");
}

#[tokio::test]
async fn a_tool_the_rojo_does_not_enable_is_neither_offered_nor_run() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            "w1",
            "write_text_content",
            json!({"path": "x.txt", "text": "x"}),
        )]),
        Turn::text("I cannot write."),
    ])
    .await;
    let config = HostConfig::builtins().upstream(&upstream).with(
        "[rojos.reader]\nprovider = \"scripted\"\ntools = [\"list_files\", \"get_text_content\"]\n",
    );
    let host = TestHost::start(config).await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "rojo": "reader", "message": "write x"}))
            .await,
    )
    .await;
    let offered: Vec<String> = upstream.received()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered, ["get_text_content", "list_files"]);
    let (_, ok, result) = &stream.results()[0];
    assert!(!ok);
    assert_eq!(result, "error: tool write_text_content is not enabled for this assistant; available tools: get_text_content, list_files");
    assert!(!host.project_root("demo").join("x.txt").exists());
}

#[tokio::test]
async fn a_runaway_loop_is_stopped_by_max_steps_with_a_last_turn_without_tools() {
    let mut turns: Vec<Turn> = (0..2)
        .map(|i| {
            Turn::tool_calls(&[(
                &format!("c{i}"),
                "list_files",
                json!({"path": format!("d{i}")}),
            )])
        })
        .collect();
    turns.push(Turn::text("I looked twice; here is what I found."));
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[rojos.default]\nprovider = \"scripted\"\nmax_steps = 3\n");
    let host = TestHost::start(config).await;
    let stream = Stream::read(host.chat(message("look around forever")).await).await;
    let requests = upstream.received();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["tool_choice"], "auto");
    assert_eq!(requests[2].body["tool_choice"], "none");
    assert_eq!(stream.text(), "I looked twice; here is what I found.");
    assert_eq!(
        stream.errors(),
        ["step limit reached: 3 model turns; the model was asked to answer without tools"]
    );
    assert_eq!(stream.done().1, "max_steps");
}

#[tokio::test]
async fn calls_made_anyway_on_the_last_step_are_not_run_and_the_error_counts_them() {
    let turns = vec![
        Turn::tool_calls(&[("c0", "list_files", json!({"path": "."}))]),
        // Asked to answer without tools, the model calls one anyway.
        Turn::tool_calls(&[("c1", "list_files", json!({"path": "sub"}))]),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[rojos.default]\nprovider = \"scripted\"\nmax_steps = 2\n");
    let host = TestHost::start(config).await;
    let stream = Stream::read(host.chat(message("look around")).await).await;
    assert_eq!(stream.results().len(), 1, "only the first step's call ran");
    assert_eq!(
        stream.errors(),
        [
            "step limit reached: 2 model turns; the model was asked to answer without tools \
          (1 further tool call(s) were not run)"
        ]
    );
    assert_eq!(stream.done().1, "max_steps");
}

#[tokio::test]
async fn a_rojo_of_one_step_answers_without_a_step_limit_error() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("Hello.")]).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[rojos.default]\nprovider = \"scripted\"\nmax_steps = 1\n");
    let host = TestHost::start(config).await;
    let stream = Stream::read(host.chat(message("hi")).await).await;
    assert_eq!(upstream.received()[0].body["tool_choice"], "none");
    assert_eq!(stream.text(), "Hello.");
    assert!(stream.errors().is_empty(), "{:?}", stream.errors());
    assert_eq!(stream.done().1, "completed");
}

#[tokio::test]
async fn a_repeated_identical_call_is_not_run_again() {
    let turns = vec![
        Turn::tool_calls(&[(
            "a1",
            "write_text_content",
            json!({"path": "n.txt", "text": "one"}),
        )]),
        Turn::tool_calls(&[(
            "a2",
            "write_text_content",
            json!({"text": "one", "path": "n.txt"}),
        )]),
        Turn::text("ok"),
    ];
    let (host, _upstream) = host_with(turns).await;
    let stream = Stream::read(host.chat(message("write it")).await).await;
    let results = stream.results();
    assert!(results[0].1);
    assert!(!results[1].1);
    assert!(
        results[1].2.contains("already made in this run (call a1)"),
        "{}",
        results[1].2
    );
}

#[tokio::test]
async fn an_oversized_result_is_cut_with_a_marker() {
    let turns = vec![
        Turn::tool_calls(&[("r1", "get_text_content", json!({"path": "big.txt"}))]),
        Turn::text("ok"),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[limits]\nmax_result_bytes = 2048\n");
    let host = TestHost::start(config).await;
    std::fs::create_dir_all(host.project_root("demo")).unwrap();
    std::fs::write(host.project_root("demo").join("big.txt"), "x".repeat(5000)).unwrap();
    let stream = Stream::read(host.chat(message("read big.txt")).await).await;
    let (_, ok, result) = &stream.results()[0];
    assert!(ok);
    assert_eq!(
        result.len(),
        2048 + "\n[result truncated by rojos: 2952 of 5000 bytes left out]".len()
    );
    assert!(result.ends_with("\n[result truncated by rojos: 2952 of 5000 bytes left out]"));
    let sent = &upstream.received()[1].body["messages"][2]["content"];
    assert_eq!(sent, result.as_str());
}

#[tokio::test]
async fn a_provider_500_ends_the_stream_with_error_then_done() {
    let (host, upstream) = host_with(vec![
        Turn::status(500, "upstream exploded"),
        Turn::status(500, "upstream exploded"),
    ])
    .await;
    let stream = Stream::read(host.chat(message("hi")).await).await;
    assert_eq!(
        upstream.received().len(),
        2,
        "retried once (max_attempts = 2)"
    );
    let errors = stream.errors();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("HTTP 500") && errors[0].contains("upstream exploded"),
        "{errors:?}"
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "provider_error");
    // The stored history stays provider-valid: the user message is answered.
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(roles(&stored), ["user", "assistant"]);
}

#[tokio::test]
async fn a_429_then_success_is_retried_before_any_output() {
    let (host, upstream) = host_with(vec![
        Turn::status(429, "slow down").header("retry-after", "0"),
        Turn::text("made it"),
    ])
    .await;
    let stream = Stream::read(host.chat(message("hi")).await).await;
    assert_eq!(stream.text(), "made it");
    assert!(stream.errors().is_empty());
    assert_eq!(upstream.received().len(), 2);
}

#[tokio::test]
async fn a_stream_cut_mid_turn_keeps_the_partial_text_and_reports_it() {
    let text = Turn::text("This answer will be cut somewhere in the middle of it.");
    let (host, _upstream) = host_with(vec![text.cut_after(500)]).await;
    let stream = Stream::read(host.chat(message("hi")).await).await;
    assert!(!stream.text().is_empty(), "partial text was streamed");
    assert_eq!(
        stream.errors(),
        ["The answer from scripted broke off before its end: send the message again"]
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "provider_error");
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(roles(&stored), ["user", "assistant"]);
    assert_eq!(stored[1]["content"], stream.text().as_str());
}

#[tokio::test]
async fn a_client_disconnect_drops_the_upstream_and_starts_no_tool() {
    // Slow text, then a tool call: a run that kept going after its client left would read
    // the whole turn (no drop mid-stream) and could write `late.txt`.
    let mut deltas = vec![json!({"role": "assistant", "content": ""})];
    deltas.extend((0..200).map(|_| json!({"content": "word "})));
    deltas.push(
        json!({"tool_calls": [{"index": 0, "id": "w1", "type": "function",
        "function": {"name": "write_text_content", "arguments": ""}}]}),
    );
    deltas.push(json!({"tool_calls": [{"index": 0,
        "function": {"arguments": "{\"path\":\"late.txt\",\"text\":\"too late\"}"}}]}));
    let slow = Turn::deltas(&deltas, "tool_calls").chunk_delay(Duration::from_millis(20));
    let (host, upstream) = host_stopping_unfollowed_runs(vec![slow]).await;
    let mut response = host.chat(message("talk slowly")).await;
    read_until(&mut response, "\"CHAT\"").await;
    drop(response);
    until_dropped(&upstream, 1).await;

    // The run was cancelled: the history is closed by the partial answer, no tool ran.
    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    assert_eq!(roles(&stored), ["user", "assistant"]);
    let partial = stored[1]["content"].as_str().unwrap();
    assert!(
        partial.starts_with("word ") && partial.len() < 200 * "word ".len(),
        "{partial:?}"
    );
    assert!(!host.project_root("demo").join("late.txt").exists());
    assert_eq!(upstream.received().len(), 1, "no further model turn");
}

#[tokio::test]
async fn healthz_answers_while_streams_run() {
    let slow = Turn::text("slow").first_delay(Duration::from_secs(2));
    let (host, _upstream) = host_with(vec![slow]).await;
    let response = host.chat(message("hi")).await;
    let chat = tokio::spawn(Stream::read(response));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let health = crate::support::host::client()
        .get(format!("{}/healthz", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert!(!chat.is_finished(), "the chat is still streaming");
    assert_eq!(chat.await.unwrap().text(), "slow");
}

#[tokio::test]
async fn shutdown_ends_open_streams_with_error_then_done() {
    let slow = Turn::text("never finished").first_delay(Duration::from_secs(30));
    let (host, _upstream) = host_with(vec![slow]).await;
    let response = host.chat(message("hi")).await;
    let body = tokio::spawn(async move { response.text().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    host.stop().await;
    let stream = Stream::parse(&body.await.unwrap());
    assert_eq!(stream.events.len(), 2);
    assert!(matches!(stream.events[0], Event::Error { .. }));
    assert_eq!(stream.done().1, "cancelled");
}

#[tokio::test]
async fn a_client_gone_during_a_tool_turn_runs_no_tool_and_leaves_a_valid_history() {
    let calls = Turn::tool_calls(&[(
        "w1",
        "write_text_content",
        json!({"path": "late.txt", "text": "too late"}),
    )])
    .chunk_delay(Duration::from_millis(50));
    let (host, upstream) = host_stopping_unfollowed_runs(vec![calls]).await;
    // A raw connection, closed as soon as the response headers arrive (no event has come yet).
    let body = message("write late.txt").to_string();
    let address = host.url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "POST /chat HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        crate::support::host::TOKEN,
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, request.as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 12];
    tokio::io::AsyncReadExt::read_exact(&mut socket, &mut head)
        .await
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // Leave once the model has started streaming the tool call (no event has reached us).
    while upstream.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(120)).await;
    drop(socket);
    for _ in 0..100 {
        if upstream.dropped() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        upstream.dropped(),
        1,
        "the upstream saw the connection dropped"
    );
    // The run stored its closing message: the history ends answered, without the calls.
    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    assert_eq!(roles(&stored), ["user", "assistant"]);
    assert_eq!(
        stored[1]["content"], "(no answer: the run was stopped: nobody followed it)",
        "{stored:?}"
    );
    assert!(
        !host.project_root("demo").join("late.txt").exists(),
        "no tool started after the client left"
    );
    assert_eq!(upstream.received().len(), 1, "no further model turn");
}

#[tokio::test]
async fn a_client_gone_during_the_first_of_two_calls_runs_not_the_second() {
    let calls = Turn::tool_calls(&[
        ("h1", "hang_tool", json!({"seconds": 1.5})),
        (
            "w1",
            "write_text_content",
            json!({"path": "late.txt", "text": "too late"}),
        ),
    ]);
    let upstream = ScriptedUpstream::start(vec![calls]).await;
    let mut config = HostConfig::builtins()
        .upstream(&upstream)
        .with(STOP_UNFOLLOWED);
    config.load.push(plugin_lib("rojos_test_hang_tool"));
    let host = TestHost::start(config).await;
    let mut response = host.chat(message("hang, then write")).await;
    let seen = read_until(&mut response, "\"TOOL_CALL\"").await;
    assert!(seen.contains("hang_tool"), "{seen}");
    drop(response);

    // Provider-valid: every call answered by its tool message, then a closing answer.
    let conversation = host.only_conversation().await;
    let stored = host.closed_history(&conversation).await;
    assert_eq!(
        roles(&stored),
        ["user", "assistant", "tool", "tool", "assistant"]
    );
    let ids: Vec<&Value> = stored[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!("h1"), &json!("w1")]);
    assert_eq!(stored[2]["tool_call_id"], "h1");
    assert_eq!(stored[2]["content"], r#"{"slept":1.5}"#);
    assert_eq!(stored[3]["tool_call_id"], "w1");
    assert_eq!(
        stored[3]["content"],
        "error: not run: the run was cancelled"
    );
    assert!(
        !host.project_root("demo").join("late.txt").exists(),
        "the second call did not run"
    );
    assert_eq!(upstream.received().len(), 1, "no further model turn");
}

#[tokio::test]
async fn a_turn_with_text_and_a_tool_call_keeps_both_in_the_history() {
    // Claude-style: a sentence, then a call, in one turn.
    let turn = Turn::deltas(
        &[
            json!({"role": "assistant", "content": ""}),
            json!({"content": "Let me look."}),
            json!({"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function",
                "function": {"name": "list_files", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":\".\"}"}}]}),
        ],
        "tool_calls",
    );
    let (host, upstream) = host_with(vec![turn, Turn::text("Nothing there.")]).await;
    let stream = Stream::read(host.chat(message("what is there?")).await).await;
    assert_eq!(
        stream.calls(),
        vec![("list_files".to_owned(), json!({"path": "."}))]
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "completed");
    let expected = json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "toolu_1", "type": "function",
         "function": {"name": "list_files", "arguments": "{\"path\":\".\"}"}}
    ]});
    let sent = upstream.received()[1].body["messages"].clone();
    assert_eq!(sent[1], expected);
    assert_eq!(sent[2]["tool_call_id"], "toolu_1");
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(roles(&stored), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(stored[1], expected);
}

#[tokio::test]
async fn an_index_less_call_with_split_arguments_runs_as_one_call() {
    // Mistral/Gemini-style entries without `index`, the arguments over three chunks.
    let turn = Turn::deltas(
        &[
            json!({"role": "assistant", "content": null}),
            json!({"tool_calls": [{"id": "Xb7kP2mQa", "type": "function",
                "function": {"name": "create_directory", "arguments": "{\"pa"}}]}),
            json!({"tool_calls": [{"function": {"arguments": "th\": \"docs"}}]}),
            json!({"tool_calls": [{"function": {"arguments": "/intro\"}"}}]}),
        ],
        "tool_calls",
    );
    let (host, upstream) = host_with(vec![turn, Turn::text("Made it.")]).await;
    let stream = Stream::read(host.chat(message("make docs/intro")).await).await;
    assert_eq!(
        stream.calls(),
        vec![("create_directory".to_owned(), json!({"path": "docs/intro"}))]
    );
    assert!(stream.results()[0].1, "{:?}", stream.results());
    assert!(host.project_root("demo").join("docs/intro").is_dir());
    let sent = upstream.received()[1].body["messages"].clone();
    assert_eq!(
        sent[1]["tool_calls"],
        json!([{"id": "Xb7kP2mQa", "type": "function",
            "function": {"name": "create_directory", "arguments": "{\"path\":\"docs/intro\"}"}}])
    );
    assert_eq!(sent[2]["tool_call_id"], "Xb7kP2mQa");
}
