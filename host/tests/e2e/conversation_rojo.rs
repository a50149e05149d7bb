//! A conversation's rojo (`docs/api.md`, "A conversation's rojo"): a follow-up, a
//! regenerate or an edit that leaves `rojo` out runs under the rojo the conversation was
//! started with, never `default`; naming another rojo is refused with `409` saying what to
//! do; `GET /conversations/{id}` names the rojo in `Rojos-Rojo`, and a conversation stored
//! before the store kept each turn's rojo (an earlier build ran a follow-up under the rojo its
//! request named) says from which message on its turns are known to be that rojo's in
//! `Rojos-Rojo-Kept-From`.

use serde_json::json;

use crate::{
    approval_binding::with_delete,
    support::{
        host::TestHost,
        ndjson::{Event, Stream},
        upstream::{ScriptedUpstream, Turn},
    },
};

/// `default` asks nothing; `careful` asks before deletes and denies after a second.
const TWO_ROJOS: &str = "[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\n\
     [rojos.careful]\nprovider = \"scripted\"\ntools = \"*\"\napprove = [\"delete_path\"]\n\
     [limits]\napproval_timeout_secs = 1\n";

fn delete_turn(id: &str) -> Turn {
    Turn::tool_calls(&[(id, "delete_path", json!({"path": "precious.txt"}))])
}

fn asked(stream: &Stream) -> bool {
    stream
        .all
        .iter()
        .any(|e| matches!(e, Event::ApprovalRequired { .. }))
}

#[tokio::test]
async fn a_follow_up_without_rojo_runs_under_the_conversations_own_rojo() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("hello, carefully"),
        delete_turn("c1"),
        Turn::text("not deleted"),
        delete_turn("c2"),
        Turn::text("still not deleted"),
    ])
    .await;
    let host = TestHost::start(with_delete(&upstream, TWO_ROJOS)).await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("precious.txt"), "keep me").unwrap();

    let first = Stream::read(
        host.chat(json!({"projectId": "demo", "rojo": "careful", "message": "hi"}))
            .await,
    )
    .await;
    let conversation = first.done().0;

    // The second message leaves `rojo` out: still `careful`, which asks before the delete
    // (nobody answers: denied after a second).
    let second = Stream::read(
        host.chat(
            json!({"projectId": "demo", "conversationId": conversation, "message": "tidy up"}),
        )
        .await,
    )
    .await;
    assert!(asked(&second), "{:?}", second.all);
    assert!(!second.results()[0].1, "{:?}", second.results());
    assert!(root.join("precious.txt").exists(), "not deleted unasked");

    // Regenerating without `rojo` too.
    let again = Stream::read(
        host.chat(json!({"projectId": "demo", "conversationId": conversation, "regenerate": true}))
            .await,
    )
    .await;
    assert!(asked(&again), "{:?}", again.all);
    assert!(root.join("precious.txt").exists());

    // Naming another rojo for it is refused, with what to do; nothing runs.
    let response = host
        .chat(json!({"projectId": "demo", "conversationId": conversation, "rojo": "default", "message": "now"}))
        .await;
    assert_eq!(response.status(), 409);
    let body: serde_json::Value = response.json().await.unwrap();
    let said = body["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("runs under rojo \"careful\"") && said.contains("new conversation"),
        "{body}"
    );

    let page = host.get(&format!("/conversations/{conversation}")).await;
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()
            .get("rojos-rojo")
            .and_then(|v| v.to_str().ok()),
        Some("careful")
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn naming_the_conversations_own_rojo_continues_it() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("one"), Turn::text("two")]).await;
    let host = TestHost::start(with_delete(&upstream, TWO_ROJOS)).await;
    let first = Stream::read(
        host.chat(json!({"projectId": "demo", "rojo": "careful", "message": "hi"}))
            .await,
    )
    .await;
    let conversation = first.done().0;
    let second = Stream::read(
        host.chat(json!({"projectId": "demo", "rojo": "careful", "conversationId": conversation, "message": "again"}))
            .await,
    )
    .await;
    assert_eq!(second.done().1, "completed");
    assert_eq!(second.text(), "two");
    let listed = host.get("/conversations?projectId=demo").await;
    let listed: serde_json::Value = listed.json().await.unwrap();
    assert_eq!(listed[0]["rojo"], "careful");
}

/// `Rojos-Rojo-Kept-From` of `conversation`, if sent.
async fn kept_from(host: &TestHost, conversation: &str) -> Option<String> {
    let page = host.get(&format!("/conversations/{conversation}")).await;
    assert_eq!(page.status(), 200);
    page.headers()
        .get("rojos-rojo-kept-from")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[tokio::test]
async fn a_conversation_stored_by_an_earlier_build_says_which_turns_rojo_is_not_known() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ])
    .await;
    let config = with_delete(&upstream, TWO_ROJOS);
    let host = TestHost::start(config.clone()).await;
    let mut conversation = String::new();
    for message in ["hi", "again"] {
        let mut body = json!({"projectId": "demo", "rojo": "careful", "message": message});
        if !conversation.is_empty() {
            body["conversationId"] = json!(conversation);
        }
        conversation = Stream::read(host.chat(body).await).await.done().0;
    }
    assert_eq!(
        kept_from(&host, &conversation).await,
        None,
        "every turn of a conversation this build stored is its rojo's"
    );

    // The database back to the version before the store kept it, as an earlier build left
    // it; the host migrates it when it starts again.
    let db = rusqlite::Connection::open(host.dir.path().join("storage").join("rojos.db"))
        .expect("open the host's database");
    db.execute_batch(
        "ALTER TABLE conversations DROP COLUMN rojo_kept_from; PRAGMA user_version = 7;",
    )
    .expect("back to version 7");
    drop(db);
    let host = host.restart(config).await;

    assert_eq!(kept_from(&host, &conversation).await.as_deref(), Some("4"));
    // A follow-up runs under the conversation's rojo and is known to.
    let third = Stream::read(
        host.chat(json!({"projectId": "demo", "conversationId": conversation, "message": "more"}))
            .await,
    )
    .await;
    assert_eq!(third.text(), "three");
    assert_eq!(kept_from(&host, &conversation).await.as_deref(), Some("4"));
    let stored = host.stored_messages(&conversation).await;
    assert_eq!(stored.len(), 6);
    upstream.assert_consumed();
}
