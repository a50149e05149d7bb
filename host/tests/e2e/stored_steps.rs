//! A step is stored while the next model turn's request is already on its way
//! (`docs/api.md`, "The stored history"): the test holds the database's write lock from a
//! connection of its own, so the host cannot commit. The upstream is asked all the same, and
//! nothing of its answer reaches the client until the step is stored; a step that cannot be
//! stored ends the run with the store's error and none of that answer. A run that ends before
//! its first model turn still stores its user message. A new conversation's first turn is
//! asked while the conversation is created: `POST /chat` answers only once it is stored, and
//! with the store's error (the request to the model dropped) when it cannot be.

use std::{path::Path, time::Duration};

use rusqlite::Connection;
use serde_json::json;

use crate::support::{
    demo_message as message,
    host::{HostConfig, TestHost},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// How long the test reads the stream while the step waits to be stored: the upstream's
/// answer was sent at once, so a host that passed it on would have done so by then.
const WATCH: Duration = Duration::from_millis(400);

/// The host's database, with the write lock taken: the host's writer waits for it (its busy
/// timeout is five seconds) until the test commits or rolls back.
fn lock_database(host: &TestHost) -> Connection {
    let path: &Path = &host.dir.path().join("storage").join("rojos.db");
    let db = Connection::open(path).expect("open the host's database");
    db.pragma_update(None, "foreign_keys", true)
        .expect("foreign keys on");
    db.execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    db
}

/// The messages stored for `conversation`, read on the test's own connection.
fn stored_count(db: &Connection, conversation: &str) -> i64 {
    db.query_row(
        "SELECT count(*) FROM messages WHERE conversation_id = ?1",
        [conversation],
        |row| row.get(0),
    )
    .expect("count the stored messages")
}

/// What the stream sent within [`WATCH`], as text.
async fn read_for_a_while(response: &mut reqwest::Response) -> String {
    let deadline = tokio::time::Instant::now() + WATCH;
    let mut body = Vec::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).expect("NDJSON is UTF-8")
}

#[tokio::test]
async fn the_next_turn_is_asked_while_a_message_is_stored_and_shown_only_after_it() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let (conversation, _) = Stream::read(host.chat(message("hello")).await).await.done();

    let db = lock_database(&host);
    let mut response = host
        .chat(json!({"projectId": "demo", "conversationId": conversation, "message": "again"}))
        .await;
    assert_eq!(response.status(), 200);
    // Asked with the new message while that message cannot be committed.
    upstream.until_received(2).await;
    let early = read_for_a_while(&mut response).await;
    // Only the run's first event, which names the conversation, comes before.
    assert!(
        early.is_empty() || (early.contains("\"RUN_STARTED\"") && early.lines().count() == 1),
        "nothing of the turn before the message is stored: {early}"
    );
    assert_eq!(stored_count(&db, &conversation), 2, "not stored yet");
    db.execute_batch("ROLLBACK")
        .expect("release the write lock");

    let rest = response.text().await.expect("the rest of the stream");
    let stream = Stream::parse(&rest);
    assert_eq!(stream.text(), "second answer");
    assert_eq!(stream.done().1, "completed");
    assert_eq!(
        stored_contents(&host, &conversation).await,
        ["hello", "first answer", "again", "second answer"],
        "stored in order"
    );
    let asked = upstream.received()[1].body["messages"].clone();
    assert_eq!(
        asked
            .as_array()
            .and_then(|m| m.last())
            .map(|m| &m["content"]),
        Some(&json!("again"))
    );
}

/// The text of each stored message of `conversation`, as the host's API gives them.
async fn stored_contents(host: &TestHost, conversation: &str) -> Vec<String> {
    let messages = host.stored_messages(conversation).await;
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits until the upstream has received `count` requests, failing if `chat` is answered first.
async fn asked_before_answered(
    chat: std::pin::Pin<&mut impl std::future::Future<Output = reqwest::Response>>,
    upstream: &ScriptedUpstream,
    count: usize,
) {
    tokio::select! {
        response = chat => panic!(
            "answered ({}) before the model was asked",
            response.status()
        ),
        () = upstream.until_received(count) => {}
    }
}

/// The conversations in the host's database, read on the test's own connection.
fn conversation_ids(db: &Connection) -> Vec<String> {
    let mut query = db
        .prepare("SELECT id FROM conversations ORDER BY id")
        .expect("prepare");
    let ids = query
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<Vec<String>, _>>();
    ids.expect("read the conversations")
}

#[tokio::test]
async fn a_new_conversations_first_turn_is_asked_while_it_is_created_and_answered_after() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    // The project's folder exists from its first conversation on.
    let (earlier, _) = Stream::read(host.chat(message("hello")).await).await.done();

    let db = lock_database(&host);
    let chat = host.chat(message("a new one"));
    let mut chat = std::pin::pin!(chat);
    // Without the overlap, the create waits for the lock (five seconds), then fails.
    asked_before_answered(chat.as_mut(), &upstream, 2).await;
    // The upstream answered at once; the create still waits for the lock.
    let waited = tokio::time::timeout(WATCH, &mut chat).await;
    assert!(
        waited.is_err(),
        "no answer before the conversation is stored"
    );
    assert_eq!(
        conversation_ids(&db),
        std::slice::from_ref(&earlier),
        "not stored yet"
    );
    db.execute_batch("ROLLBACK")
        .expect("release the write lock");

    let response = chat.await;
    assert_eq!(response.status(), 200);
    let stream = Stream::read(response).await;
    assert_eq!(stream.text(), "second answer");
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "completed");
    assert_ne!(conversation, earlier);
    assert_eq!(
        stored_contents(&host, &conversation).await,
        ["a new one", "second answer"]
    );
    let asked = upstream.received()[1].body["messages"].clone();
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{asked}");
    assert_eq!(asked[0]["content"], "a new one");
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_new_conversation_that_cannot_be_stored_answers_with_the_error_and_drops_its_turn() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::text("never shown").first_delay(Duration::from_secs(30)),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let (earlier, _) = Stream::read(host.chat(message("hello")).await).await.done();

    let db = lock_database(&host);
    // Every new conversation is refused once the test commits.
    db.execute_batch(
        "CREATE TRIGGER refuse_new BEFORE INSERT ON conversations \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .expect("add the trigger");
    let chat = host.chat(message("a new one"));
    let mut chat = std::pin::pin!(chat);
    asked_before_answered(chat.as_mut(), &upstream, 2).await;
    db.execute_batch("COMMIT").expect("release the write lock");

    let response = chat.await;
    assert_eq!(response.status(), 500);
    let body = response.text().await.expect("the error body");
    assert_eq!(body, r#"{"error":"internal error"}"#);
    // The model's answer, still on its way, was dropped with the request.
    for _ in 0..200 {
        if upstream.dropped() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(upstream.dropped(), 1, "the turn's request was dropped");
    assert_eq!(conversation_ids(&db), [earlier], "nothing stored");
}

#[tokio::test]
async fn a_tool_step_that_cannot_be_stored_ends_the_run_with_none_of_the_next_answer() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("call_1", "create_directory", json!({"path": "docs"}))]).held(),
        Turn::text("never shown"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let mut response = host.chat(message("make docs")).await;
    assert_eq!(response.status(), 200);
    upstream.until_received(1).await;
    // The user message is stored (the first turn is held at the upstream meanwhile) before
    // the test takes the lock, so only the tool step is left waiting for it.
    let db = Connection::open(host.dir.path().join("storage").join("rojos.db"))
        .expect("open the host's database");
    let conversation: String = db
        .query_row("SELECT id FROM conversations", [], |row| row.get(0))
        .expect("one conversation");
    for _ in 0..200 {
        if stored_count(&db, &conversation) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(stored_count(&db, &conversation), 1, "the user message");
    drop(db);
    let db = lock_database(&host);
    upstream.release();

    // The tool ran and its result was sent; the next turn is asked with it, unstored.
    upstream.until_received(2).await;
    let early = read_for_a_while(&mut response).await;
    assert!(early.contains(r#""type":"TOOL_RESULT""#), "{early}");
    assert!(!early.contains(r#""type":"CHAT""#), "{early}");
    assert!(host.project_root("demo").join("docs").is_dir());
    // The step can never be stored: its conversation is gone when the lock is released.
    db.execute("DELETE FROM conversations WHERE id = ?1", [&conversation])
        .expect("delete the conversation");
    db.execute_batch("COMMIT").expect("release the write lock");

    let rest = response.text().await.expect("the rest of the stream");
    let stream = Stream::parse(&format!("{early}{rest}"));
    assert_eq!(stream.text(), "", "none of the unstored step's answer");
    let errors = stream.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("the conversation could not be saved"),
        "{errors:?}"
    );
    assert_eq!(stream.done().1, "internal_error");
}

#[tokio::test]
async fn a_run_whose_project_folder_cannot_be_opened_stores_its_message_then_ends() {
    let upstream = ScriptedUpstream::start(vec![]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    // A symlink where the project's `root` folder should be is refused.
    let project = host.dir.path().join("storage").join("demo");
    std::fs::create_dir_all(&project).unwrap();
    std::os::unix::fs::symlink(host.dir.path(), project.join("root")).unwrap();

    let stream = Stream::read(host.chat(message("hello")).await).await;
    assert_eq!(stream.errors(), ["the project folder cannot be opened"]);
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "internal_error");
    assert!(upstream.received().is_empty(), "no model turn");
    // The user message was waiting for the model's request; it is stored before the end.
    let messages = host.stored_messages(&conversation).await;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant"], "{messages:?}");
    assert_eq!(messages[0]["content"], "hello");
}
