//! Several hosts on one database: two real `rojos` processes with the same `rojos.toml`
//! (each on a port of its own), one throwaway PostgreSQL server and one storage folder. A
//! conversation started on one host continues on the other and both list the same
//! conversations; two messages sent at once to one conversation, one through each host,
//! give exactly one run and one `409` (the run lease is a row in the database); a host
//! killed with SIGKILL mid-run keeps the conversation locked until its lease expires
//! (`[store] run_lease_secs`, short here), then the other host takes it and closes the
//! interrupted history, which stays one a provider accepts; an undo on such a history closes
//! it before its record, so the model reads it in an order every provider accepts.

use std::time::Duration;

use serde_json::{json, Value};

use crate::postgres::{chat, chat_once_free, cluster, serve};
use crate::support::{
    binary::RunningBinary,
    host::{get_json_at, stored_messages_at, HostConfig},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// The run lease's time-to-live in these tests: a killed host's lease is gone this soon.
const LEASE_SECS: u64 = 4;

/// The `409` body's text.
const RUN_IN_PROGRESS: &str =
    "a reply is still being written in this conversation; wait for it to finish or stop it";

/// The closing message a run stores before its user message when the run before it was
/// interrupted.
const INTERRUPTED: &str = "(no answer: the run was interrupted)";

/// Two hosts serving one `rojos.toml` (one database of the shared cluster, one storage
/// folder); keep the folder alive as long as the hosts.
struct TwoHosts {
    _dir: tempfile::TempDir,
    a: RunningBinary,
    a_url: String,
    b_url: String,
    _b: RunningBinary,
}

impl TwoHosts {
    fn start(upstream: &ScriptedUpstream) -> TwoHosts {
        TwoHosts::start_with(upstream, "")
    }

    /// [`TwoHosts::start`] with `extra` TOML in the config (e.g. a rojo of its own).
    fn start_with(upstream: &ScriptedUpstream, extra: &str) -> TwoHosts {
        TwoHosts::start_loading(upstream, extra, &[])
    }

    /// [`TwoHosts::start_with`], loading the built-in `plugins` (e.g. `delete_path`) too.
    fn start_loading(upstream: &ScriptedUpstream, extra: &str, plugins: &[&str]) -> TwoHosts {
        let cluster = cluster();
        let database = cluster.create_database().unwrap();
        let store = format!(
            "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{}\"\n\
             connect_timeout_secs = 2\nrun_lease_secs = {LEASE_SECS}\n",
            cluster.url(&database),
            crate::postgres::PASSWORD_VAR,
        );
        let mut config = HostConfig::builtins()
            .upstream(upstream)
            .with(&store)
            .with(extra);
        for plugin in plugins {
            config
                .load
                .push(crate::support::plugin_lib(&format!("rojos_tool_{plugin}")));
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rojos.toml"), config.render()).unwrap();
        let (a, a_url) = serve(cluster, &dir);
        let (b, b_url) = serve(cluster, &dir);
        assert_ne!(a_url, b_url);
        TwoHosts {
            _dir: dir,
            a,
            a_url,
            b_url,
            _b: b,
        }
    }
}

/// The stored history of `conversation`, read through the host at `url`.
async fn history(url: &str, conversation: &str) -> Vec<Value> {
    stored_messages_at(url, conversation).await
}

fn contents(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect()
}

/// Panics unless `messages` is a history every provider accepts before a new user message:
/// each assistant tool call answered by its `tool` message right after it, no `tool`
/// message without its call, and no `user` message straight after a `tool` one or at the
/// end.
fn assert_provider_valid(messages: &[Value]) {
    let mut open_calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        match role {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let at = open_calls.iter().position(|c| c == id);
                let at =
                    at.unwrap_or_else(|| panic!("message {i} answers no open call: {messages:#?}"));
                open_calls.remove(at);
            }
            _ => {
                assert!(
                    open_calls.is_empty(),
                    "calls {open_calls:?} unanswered before message {i}: {messages:#?}"
                );
                if role == "user" && i > 0 {
                    assert_ne!(
                        messages[i - 1]["role"],
                        "tool",
                        "a user message right after tool results: {messages:#?}"
                    );
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    open_calls.push(call["id"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    }
    assert!(
        open_calls.is_empty(),
        "calls {open_calls:?} unanswered: {messages:#?}"
    );
    let last = messages.last().map(|m| m["role"].clone());
    assert_eq!(
        last,
        Some(json!("assistant")),
        "the history ends closed: {messages:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_started_on_one_host_continues_on_the_other_and_both_list_it() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("answered by A"),
        Turn::text("answered by B"),
    ])
    .await;
    let hosts = TwoHosts::start(&upstream);

    let first = Stream::read(chat(&hosts.a_url, "one", None).await).await;
    let (conversation, _) = first.done();
    let second = Stream::read(chat(&hosts.b_url, "two", Some(&conversation)).await).await;

    assert_eq!(second.text(), "answered by B");
    let received = upstream.received();
    assert_eq!(
        contents(&received[1].body["messages"].as_array().unwrap().clone()),
        ["one", "answered by A", "two"],
        "host B sent the model the history host A stored"
    );
    let on_a = history(&hosts.a_url, &conversation).await;
    assert_eq!(
        contents(&on_a),
        ["one", "answered by A", "two", "answered by B"]
    );
    let list_a = get_json_at(&hosts.a_url, "/conversations?projectId=demo").await;
    let list_b = get_json_at(&hosts.b_url, "/conversations?projectId=demo").await;
    assert_eq!(list_a, list_b);
    assert_eq!(list_a.as_array().map(Vec::len), Some(1), "{list_a}");
    assert_eq!(list_a[0]["id"], json!(conversation));
    assert_eq!(list_a[0]["messageCount"], json!(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_at_once_through_both_hosts_give_one_run_and_one_409() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("the start"),
        // Written slowly, past twice the lease's time-to-live: the winner keeps renewing it.
        Turn::text_in_pieces("the only reply", 1).chunk_delay(Duration::from_millis(600)),
    ])
    .await;
    let hosts = TwoHosts::start(&upstream);
    let started = Stream::read(chat(&hosts.a_url, "start", None).await).await;
    let (conversation, _) = started.done();

    let (on_a, on_b) = tokio::join!(
        chat(&hosts.a_url, "from a", Some(&conversation)),
        chat(&hosts.b_url, "from b", Some(&conversation)),
    );

    let statuses = [on_a.status().as_u16(), on_b.status().as_u16()];
    let mut sorted = statuses;
    sorted.sort_unstable();
    assert_eq!(sorted, [200, 409], "one run, one refusal");
    let (ran, refused, sent) = if statuses[0] == 200 {
        (on_a, on_b, "from a")
    } else {
        (on_b, on_a, "from b")
    };
    let refusal: Value = refused.json().await.unwrap();
    assert_eq!(refusal["error"], json!(RUN_IN_PROGRESS));
    let ran = Stream::read(ran).await;
    assert_eq!(ran.text(), "the only reply", "{ran:#?}");
    assert_eq!(ran.done().1, "completed");
    upstream.assert_consumed();
    assert_eq!(
        upstream.received().len(),
        2,
        "exactly one run reached the model"
    );
    assert_eq!(
        contents(&history(&hosts.b_url, &conversation).await),
        ["start", "the start", sent, "the only reply"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_mid_run_frees_the_conversation_after_its_lease_and_leaves_a_valid_history() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("c1", "get_text_content", json!({"path": "notes.txt"}))]),
        // Host A dies while this turn is held open.
        Turn::text("never delivered").first_delay(Duration::from_secs(60)),
        Turn::text("answered by B"),
    ])
    .await;
    let mut hosts = TwoHosts::start(&upstream);
    let running = chat(&hosts.a_url, "read my notes", None).await;
    assert_eq!(running.status(), 200);
    upstream.until_received(2).await;
    let listed = get_json_at(&hosts.b_url, "/conversations?projectId=demo").await;
    let conversation = listed[0]["id"].as_str().unwrap().to_owned();

    hosts.a.kill();
    drop(running);
    let held = chat(&hosts.b_url, "too soon", Some(&conversation)).await;
    assert_eq!(held.status(), 409, "the dead host's lease still holds");

    let next = chat_once_free(&hosts.b_url, "go on", &conversation).await;
    assert_eq!(next.status(), 200, "free once the lease expired");
    let next = Stream::read(next).await;
    assert_eq!(next.text(), "answered by B");

    let stored = history(&hosts.b_url, &conversation).await;
    assert_provider_valid(&stored);
    let roles: Vec<&str> = stored.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(stored[1]["tool_calls"][0]["id"], json!("c1"));
    assert_eq!(stored[2]["tool_call_id"], json!("c1"));
    let said = contents(&stored);
    assert_eq!(
        [said[0], said[3], said[4], said[5]],
        ["read my notes", INTERRUPTED, "go on", "answered by B"]
    );
    let sent = upstream.received()[2].body["messages"].clone();
    let sent = sent.as_array().unwrap();
    assert_eq!(sent.last().unwrap()["content"], json!("go on"));
    assert_provider_valid(&sent[..sent.len() - 1]);
}

/// Approvals through the shared database (`docs/api.md`, "Approvals"): a run on host A waits
/// for a decision past the lease's time-to-live (its lease stays renewed: a message through
/// host B is refused meanwhile), the decision reaches host B, and A's run goes on with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_sent_to_the_other_host_reaches_the_waiting_run() {
    use crate::approvals::{decide_at, OpenChat, APPROVING_ROJO};
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            "call_1",
            "write_text_content",
            json!({"path": "shared.txt", "text": "from A"}),
        )]),
        Turn::text("written"),
    ])
    .await;
    let hosts = TwoHosts::start_with(&upstream, APPROVING_ROJO);
    let mut waiting = OpenChat::start_at(
        &hosts.a_url,
        json!({"projectId": "demo", "message": "write"}),
    )
    .await;
    let (call, _, _) = waiting.approval_required(1).await;
    let listed = get_json_at(&hosts.b_url, "/conversations?projectId=demo").await;
    let conversation = listed[0]["id"].as_str().unwrap().to_owned();

    // Past the lease's time-to-live: still held, because the waiting run keeps renewing it.
    tokio::time::sleep(Duration::from_secs(LEASE_SECS + 2)).await;
    let meanwhile = chat(&hosts.b_url, "me too", Some(&conversation)).await;
    assert_eq!(
        meanwhile.status(),
        409,
        "the waiting run still holds the conversation"
    );

    let (status, body) = decide_at(
        &hosts.b_url,
        Some(crate::support::host::TOKEN),
        &conversation,
        &call,
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let stream = waiting.finish().await;
    assert_eq!(stream.done().1, "completed");
    assert!(stream.results()[0].1, "{:?}", stream.results());
    let stored = history(&hosts.a_url, &conversation).await;
    let tool = stored.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["rojos"], json!({"approval": {"decision": "approve"}}));
    let (again, _) = decide_at(
        &hosts.a_url,
        Some(crate::support::host::TOKEN),
        &conversation,
        &call,
        json!({"decision": "deny"}),
    )
    .await;
    assert_eq!(again, 409, "host A sees the decision host B took");
}

/// A decision bound to the call the user was shown, through the shared database: turn 1's
/// approval, taken through host A, sent again through host B once the model's next turn
/// reused its call id for a delete, approves nothing (`approval_binding.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_sent_again_to_the_other_host_never_approves_a_reused_call_id() {
    use crate::approval_binding::{
        reused_call_id_attack, reused_call_id_turns, WRITES_AND_DELETES_ASKED,
    };
    let upstream = ScriptedUpstream::start(reused_call_id_turns()).await;
    let hosts = TwoHosts::start_loading(&upstream, WRITES_AND_DELETES_ASKED, &["delete_path"]);
    let root = hosts._dir.path().join("storage").join("demo").join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("precious.txt"), "keep me").unwrap();
    reused_call_id_attack(&hosts.a_url, &hosts.b_url, &root).await;
    upstream.assert_consumed();
}

/// `POST url/conversations/{conversation}/undo`, again while the run lease of a dead host
/// still holds the conversation (`409`): its status and body.
async fn undo_once_free(url: &str, conversation: &str) -> (u16, Value) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = crate::support::host::client()
            .post(format!("{url}/conversations/{conversation}/undo"))
            .bearer_auth(crate::support::host::TOKEN)
            .send()
            .await
            .expect("undo is answered");
        let status = response.status().as_u16();
        if status != 409 || std::time::Instant::now() > deadline {
            return (status, response.json().await.unwrap_or(Value::Null));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_on_a_history_a_dead_host_left_open_keeps_it_one_every_provider_accepts() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[(
            "w1",
            "write_text_content",
            json!({"path": "notes.txt", "text": "rewritten"}),
        )]),
        // Host A dies while this turn is held open: the history ends on the tool result.
        Turn::text("never delivered").first_delay(Duration::from_secs(60)),
        Turn::text("answered by B"),
    ])
    .await;
    let mut hosts = TwoHosts::start(&upstream);
    let running = chat(&hosts.a_url, "rewrite my notes", None).await;
    assert_eq!(running.status(), 200);
    upstream.until_received(2).await;
    let listed = get_json_at(&hosts.b_url, "/conversations?projectId=demo").await;
    let conversation = listed[0]["id"].as_str().unwrap().to_owned();
    hosts.a.kill();
    drop(running);
    let left = history(&hosts.b_url, &conversation).await;
    assert_eq!(left.last().unwrap()["role"], "tool", "{left:#?}");

    let (status, body) = undo_once_free(&hosts.b_url, &conversation).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["recorded"], true, "{body}");
    let stored = history(&hosts.b_url, &conversation).await;
    assert_provider_valid(&stored);
    let roles: Vec<&str> = stored.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ],
        "the open turn is closed before the undo's record: {stored:#?}"
    );
    assert_eq!(contents(&stored)[3], INTERRUPTED);
    assert!(
        contents(&stored)[4].contains("`notes.txt`"),
        "the record names the path: {stored:#?}"
    );

    let next = chat(&hosts.b_url, "go on", Some(&conversation)).await;
    assert_eq!(next.status(), 200);
    assert_eq!(Stream::read(next).await.text(), "answered by B");
    // What the model read: the whole history in an order every provider accepts, the
    // undo's record among it.
    let sent = upstream.received()[2].body["messages"].clone();
    let sent: Vec<Value> = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect();
    assert_eq!(sent.last().unwrap()["content"], json!("go on"));
    assert_provider_valid(&sent[..sent.len() - 1]);
    assert!(
        sent.iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.contains("I undid"))),
        "the model reads the undo: {sent:#?}"
    );
}
