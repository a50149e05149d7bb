//! The run budgets (`[limits]`, `docs/configuration.md` "Budgets"): tool calls per model
//! turn, tool-result bytes per turn and per run, the conversation's stored size, and the
//! repeated-call check comparing paths in canonical form. Every test asserts counts and
//! sizes: what ran, what the model was told, what was sent upstream and what was stored.

use serde_json::{json, Value};

use crate::support::{
    demo_message as message,
    host::{stored_bytes, HostConfig, TestHost},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// `[limits]` defaults, as documented.
const MAX_TOOL_CALLS_PER_TURN: usize = 32;
const MAX_RESULT_BYTES: usize = 128 * 1024;
const MAX_TURN_RESULT_BYTES: usize = 1 << 20;

/// Writes `files` (`(path, text)`) into project `demo`.
fn write_files(host: &TestHost, files: &[(&str, String)]) {
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    for (path, text) in files {
        std::fs::write(root.join(path), text).unwrap();
    }
}

/// The value of one Prometheus series (name and labels exactly as rendered), 0 when absent.
async fn metric(host: &TestHost, series: &str) -> f64 {
    let text = host.get("/metrics").await.text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

fn calls_limit_error() -> String {
    format!(
        "error: not run: a model turn may make at most {MAX_TOOL_CALLS_PER_TURN} tool calls \
         (limits.max_tool_calls_per_turn); make the remaining calls in your next turn"
    )
}

/// See: a release-build measurement (1,500 reads of a 1 MB file in one turn,
/// repeats dodged with `./` prefixes: 860 MB of memory, a 200 MB request upstream).
#[tokio::test]
async fn a_flood_of_prefix_dodged_reads_runs_at_most_the_cap_and_stays_bounded() {
    const CALLS: usize = 1500;
    let prefixes = ["", "./", "././", ".//"];
    let ids: Vec<String> = (0..CALLS).map(|i| format!("f{i}")).collect();
    let calls: Vec<(&str, &str, Value)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let path = format!("{}big.txt", prefixes[i % prefixes.len()]);
            (id.as_str(), "get_text_content", json!({"path": path}))
        })
        .collect();
    let upstream =
        ScriptedUpstream::start(vec![Turn::tool_calls(&calls), Turn::text("It is big.")]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    write_files(&host, &[("big.txt", "x".repeat(1_000_000))]);

    let stream = Stream::read(host.chat(message("read big.txt, a lot")).await).await;
    assert_eq!(stream.done().1, "completed");
    assert_eq!(stream.text(), "It is big.");
    let results = stream.results();
    assert_eq!(results.len(), CALLS, "every call gets its result");

    // Only the first read ran; the next 31 were repeats of it, the rest over the cap.
    let repeat = "error: not run again: the same call was already made in this run (call f0); \
                  use its result above instead of repeating it";
    let (first, within, beyond) = (
        &results[0],
        &results[1..MAX_TOOL_CALLS_PER_TURN],
        &results[MAX_TOOL_CALLS_PER_TURN..],
    );
    assert!(first.1);
    assert!(first.2.starts_with(&"x".repeat(MAX_RESULT_BYTES)));
    assert!(
        first
            .2
            .ends_with("\n[result truncated by rojos: 868928 of 1000000 bytes left out]"),
        "{}",
        &first.2[MAX_RESULT_BYTES..]
    );
    assert!(within.iter().all(|(_, ok, text)| !ok && text == repeat));
    assert!(beyond
        .iter()
        .all(|(_, ok, text)| !ok && *text == calls_limit_error()));
    let refused_repeats = metric(
        &host,
        r#"rojos_tool_calls_refused_total{reason="repeated"}"#,
    )
    .await;
    let refused_over_cap = metric(
        &host,
        r#"rojos_tool_calls_refused_total{reason="calls_per_turn"}"#,
    )
    .await;
    assert_eq!(refused_repeats, 31.0);
    assert_eq!(refused_over_cap, (CALLS - MAX_TOOL_CALLS_PER_TURN) as f64);
    let ran = CALLS - refused_repeats as usize - refused_over_cap as usize;
    assert!(ran <= MAX_TOOL_CALLS_PER_TURN, "{ran} calls ran");

    // The next turn's request: one capped result, the 1,500 calls and their short errors.
    upstream.assert_consumed();
    let requests = upstream.received();
    let next = &requests[1].body;
    let tool_messages: Vec<&Value> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), CALLS);
    let request_bytes = next.to_string().len();
    // The margin: the assistant message with 1,500 calls (~100 bytes each) and 1,499 error
    // results (~200 bytes each with their message framing).
    let margin = 512 * 1024;
    assert!(
        request_bytes <= MAX_TURN_RESULT_BYTES + margin,
        "{request_bytes} bytes sent upstream"
    );

    // The stored conversation is that history plus the answer.
    let messages = host.stored_messages(&stream.done().0).await;
    let stored_bytes = stored_bytes(&messages);
    assert_eq!(messages.len(), 1 + 1 + CALLS + 1);
    assert!(
        stored_bytes <= MAX_TURN_RESULT_BYTES + margin,
        "{stored_bytes} bytes stored"
    );
}

#[tokio::test]
async fn repeats_dodged_with_path_prefixes_are_refused_naming_the_earlier_call() {
    let turns = vec![
        Turn::tool_calls(&[
            ("r1", "get_text_content", json!({"path": "notes/a.txt"})),
            ("l1", "list_files", json!({"path": "notes"})),
        ]),
        Turn::tool_calls(&[
            ("r2", "get_text_content", json!({"path": "./notes//a.txt"})),
            (
                "r3",
                "get_text_content",
                json!({"path": "././notes/./a.txt"}),
            ),
            ("l2", "list_files", json!({"path": "./notes/"})),
            // Free text is never normalised: these two writes differ.
            (
                "w1",
                "write_text_content",
                json!({"path": "notes/b.txt", "text": "./x"}),
            ),
            (
                "w2",
                "write_text_content",
                json!({"path": "./notes/b.txt", "text": "x"}),
            ),
            (
                "w3",
                "write_text_content",
                json!({"path": "notes//b.txt", "text": "x"}),
            ),
        ]),
        Turn::text("Read it."),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    std::fs::create_dir_all(host.project_root("demo").join("notes")).unwrap();
    write_files(&host, &[("notes/a.txt", "hello".to_owned())]);

    let stream = Stream::read(host.chat(message("read notes/a.txt")).await).await;
    let repeat = |earlier: &str| {
        format!(
            "error: not run again: the same call was already made in this run (call {earlier}); \
             use its result above instead of repeating it"
        )
    };
    let results: Vec<(bool, String)> = stream
        .results()
        .into_iter()
        .map(|(_, ok, text)| (ok, text))
        .collect();
    assert_eq!(
        results,
        vec![
            (true, "hello".to_owned()),
            (true, r#"[{"name":"a.txt","type":"file"}]"#.to_owned()),
            (false, repeat("r1")),
            (false, repeat("r1")),
            (false, repeat("l1")),
            (true, r#"{"ok":true}"#.to_owned()),
            (true, r#"{"ok":true}"#.to_owned()),
            (false, repeat("w2")),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(host.project_root("demo").join("notes/b.txt")).unwrap(),
        "x"
    );
    assert_eq!(
        metric(
            &host,
            r#"rojos_tool_calls_refused_total{reason="repeated"}"#
        )
        .await,
        4.0
    );
    // The plugin was given the model's own spelling: the path in the arguments shown is it.
    assert_eq!(stream.calls()[2].1, json!({"path": "./notes//a.txt"}));
    assert_eq!(stream.done().1, "completed");
}

#[tokio::test]
async fn a_failed_call_may_be_made_again_once_its_cause_is_fixed() {
    let turns = vec![
        Turn::tool_calls(&[("g1", "get_text_content", json!({"path": "todo.txt"}))]),
        Turn::tool_calls(&[(
            "w1",
            "write_text_content",
            json!({"path": "todo.txt", "text": "buy milk"}),
        )]),
        Turn::tool_calls(&[("g2", "get_text_content", json!({"path": "./todo.txt"}))]),
        Turn::text("It says: buy milk."),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let stream = Stream::read(host.chat(message("what is in todo.txt?")).await).await;
    let results = stream.results();
    assert!(!results[0].1, "{}", results[0].2);
    assert!(results[0].2.contains("todo.txt"), "{}", results[0].2);
    assert!(results[1].1);
    assert_eq!(
        (results[2].1, results[2].2.as_str()),
        (true, "buy milk"),
        "the failed read is run again"
    );
}

#[tokio::test]
async fn result_budgets_cut_and_refuse_per_turn_and_across_the_turns_of_a_run() {
    // Per result 2000 bytes, per turn 3000, per run 5000; every file holds 2500 bytes.
    let read = |id: &'static str, path: &str| (id, "get_text_content", json!({"path": path}));
    let turns = vec![
        Turn::tool_calls(&[read("a", "f1"), read("b", "f2"), read("c", "f3")]),
        Turn::tool_calls(&[read("d", "f3"), read("e", "f4")]),
        Turn::tool_calls(&[read("f", "f5")]),
        Turn::text("That is all I could read."),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream).with(
        "[limits]\nmax_result_bytes = 2000\nmax_turn_result_bytes = 3000\n\
         max_run_result_bytes = 5000\n",
    ))
    .await;
    let files: Vec<(String, String)> = (1..=5)
        .map(|i| (format!("f{i}"), i.to_string().repeat(2500)))
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(&host, &files);

    let stream = Stream::read(host.chat(message("read them all")).await).await;
    let results: Vec<(bool, String)> = stream
        .results()
        .into_iter()
        .map(|(_, ok, text)| (ok, text))
        .collect();
    let turn_limit = "this model turn's tool results reached their limit of 3000 bytes \
                      (limits.max_turn_result_bytes)";
    let run_limit = "the tool results of this run reached their limit of 5000 bytes \
                     (limits.max_run_result_bytes)";
    let run_refusal = (
        false,
        format!(
            "error: not run: {run_limit}; answer with what you have; the user can ask for more \
             in a new message"
        ),
    );
    assert_eq!(
        results,
        vec![
            // Turn 1: the per-result cap, then cut to the turn's last 1000 bytes, then refused.
            (
                true,
                format!(
                    "{}\n[result truncated by rojos: 500 of 2500 bytes left out]",
                    "1".repeat(2000)
                )
            ),
            (
                true,
                format!(
                    "{}\n[result truncated by rojos: 1500 of 2500 bytes left out; {turn_limit}]",
                    "2".repeat(1000)
                )
            ),
            (
                false,
                format!("error: not run: {turn_limit}; make the remaining calls in your next turn")
            ),
            // Turn 2: a fresh turn budget, but only 2000 bytes of the run are left.
            (
                true,
                format!(
                    "{}\n[result truncated by rojos: 500 of 2500 bytes left out]",
                    "3".repeat(2000)
                )
            ),
            run_refusal.clone(),
            // Turn 3: the run's budget stays used up.
            run_refusal,
        ]
    );
    assert_eq!(stream.done().1, "completed");
    assert_eq!(stream.text(), "That is all I could read.");

    // What the model was given of the files (each result's text before any marker), over
    // the whole run: the run budget.
    upstream.assert_consumed();
    let last = &upstream.received()[3].body["messages"];
    let file_bytes: usize = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().unwrap().split('\n').next())
        .filter(|text| text.bytes().all(|b| b.is_ascii_digit()))
        .map(str::len)
        .sum();
    assert_eq!(file_bytes, 5000);
    for (reason, count) in [("turn_result_bytes", 1.0), ("run_result_bytes", 2.0)] {
        let series = format!(r#"rojos_tool_calls_refused_total{{reason="{reason}"}}"#);
        assert_eq!(metric(&host, &series).await, count, "{series}");
    }
}

#[tokio::test]
async fn a_run_whose_conversation_reaches_its_size_limit_stops_with_limit_reached() {
    let turns = vec![
        Turn::tool_calls(&[("g1", "get_text_content", json!({"path": "big.txt"}))]),
        Turn::text("never asked for"),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with("[limits]\nmax_conversation_bytes = 65536\n"),
    )
    .await;
    write_files(&host, &[("big.txt", "y".repeat(100_000))]);

    let stream = Stream::read(host.chat(message("read big.txt")).await).await;
    assert_eq!(
        stream.errors(),
        ["the conversation reached its size limit of 65536 bytes \
          (limits.max_conversation_bytes); start a new conversation to continue"]
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "limit_reached");
    assert_eq!(
        upstream.received().len(),
        1,
        "no model turn after the limit"
    );

    // The history is closed: it ends on an assistant message a provider accepts.
    let messages = host.stored_messages(&conversation).await;
    assert_eq!(roles(&messages), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(
        messages[3]["content"],
        "(no answer: the conversation reached its size limit of 65536 bytes \
         (limits.max_conversation_bytes); start a new conversation to continue)"
    );
    assert_eq!(
        metric(
            &host,
            r#"rojos_chats_finished_total{stop_reason="limit_reached"}"#
        )
        .await,
        1.0
    );
}

#[tokio::test]
async fn the_earlier_history_counts_toward_the_size_limit_of_a_later_run() {
    // A first run stores about 40 kB; in the second, a 30 kB tool result alone stays under the
    // limit, but with the earlier history the conversation passes it.
    let turns = vec![
        Turn::text(&"a".repeat(40_000)),
        Turn::tool_calls(&[("g1", "get_text_content", json!({"path": "mid.txt"}))]),
        Turn::text("never asked for"),
    ];
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with("[limits]\nmax_conversation_bytes = 65536\n"),
    )
    .await;
    write_files(&host, &[("mid.txt", "z".repeat(30_000))]);

    let (conversation, stop) = Stream::read(host.chat(message("say a lot")).await)
        .await
        .done();
    assert_eq!(stop, "completed");
    let mut second = message("now read mid.txt");
    second["conversationId"] = json!(conversation);
    let (_, stop) = Stream::read(host.chat(second).await).await.done();
    assert_eq!(stop, "limit_reached");
    assert_eq!(
        upstream.received().len(),
        2,
        "no model turn after the limit"
    );
}

#[tokio::test]
async fn a_history_of_exactly_the_size_limit_may_go_on_and_one_byte_over_may_not() {
    // The limit is checked before each model turn against the stored history.
    let script = || {
        vec![
            Turn::tool_calls(&[("g1", "get_text_content", json!({"path": "a.txt"}))]),
            Turn::text("done"),
        ]
    };
    let run = |limit: usize| async move {
        let upstream = ScriptedUpstream::start(script()).await;
        let host = TestHost::start(HostConfig::builtins().upstream(&upstream).with(&format!(
            "[limits]\nmax_conversation_bytes = {limit}\nmax_result_bytes = 262144\n"
        )))
        .await;
        // Over the limit's floor (64 KiB) after one tool result.
        write_files(&host, &[("a.txt", "x".repeat(100_000))]);
        let (conversation, stop) = Stream::read(host.chat(message("read a.txt")).await)
            .await
            .done();
        (stop, host.stored_messages(&conversation).await)
    };
    // What the history weighs when the second model turn is about to be asked: all but the
    // answer of a run with room to spare.
    let (stop, stored) = run(1 << 20).await;
    assert_eq!(stop, "completed");
    let at_second_turn = stored_bytes(&stored[..stored.len() - 1]);

    let (stop, _) = run(at_second_turn).await;
    assert_eq!(stop, "completed", "a history of exactly the limit goes on");
    let (stop, _) = run(at_second_turn - 1).await;
    assert_eq!(
        stop, "limit_reached",
        "one byte over the limit stops the run"
    );
}
