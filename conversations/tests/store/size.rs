//! A conversation's stored size: the bytes of its messages' JSON text, kept by `append`
//! in the step's transaction, shown on every record, and computed for the rows of a
//! version-1 file when it is migrated.

use rojos_conversations::{ConversationStore, SqliteStore, SCHEMA_VERSION};
use serde_json::{json, Value};

use crate::support::{assistant, on_both_backends, open_temp, raw, user, Backend};

/// The bytes a message takes in the store: its compact JSON text.
fn bytes(messages: &[Value]) -> u64 {
    messages.iter().map(|m| m.to_string().len() as u64).sum()
}

async fn each_step_adds_the_bytes_of_its_messages_json(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    assert_eq!(store.head(&id).await.unwrap().unwrap().stored_bytes, 0);
    // Multi-byte characters count as their UTF-8 bytes, not as characters.
    let first = vec![user("héllo \u{1F980} \"quoted\"")];
    let second = vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
               "function": {"name": "list_files", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "[]"}),
    ];

    store.append(&id, first.clone()).await.unwrap();
    assert_eq!(
        store.head(&id).await.unwrap().unwrap().stored_bytes,
        bytes(&first)
    );
    store.append(&id, second.clone()).await.unwrap();

    let expected = bytes(&first) + bytes(&second);
    assert!(expected > 0);
    let head = store.head(&id).await.unwrap().unwrap();
    assert_eq!((head.stored_bytes, head.message_count), (expected, 3));
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().stored_bytes,
        expected
    );
    let summary = &store.list("demo", 10).await.unwrap()[0];
    assert_eq!(summary.stored_bytes, expected);
    assert_eq!(
        serde_json::to_value(summary).unwrap()["storedBytes"],
        json!(expected)
    );
    let conversation = serde_json::to_value(store.get(&id).await.unwrap().unwrap()).unwrap();
    assert_eq!(conversation["storedBytes"], json!(expected));
}

async fn a_refused_step_adds_nothing(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("one")]).await.unwrap();
    let before = store.head(&id).await.unwrap().unwrap().stored_bytes;

    store
        .append(&id, vec![assistant("fine"), json!("not an object")])
        .await
        .unwrap_err();

    assert_eq!(store.head(&id).await.unwrap().unwrap().stored_bytes, before);
}

async fn head_reads_a_conversation_without_its_messages_and_none_for_an_unknown_id(
    backend: Backend,
) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "reader").await.unwrap();
    store.append(&id, vec![user("hi")]).await.unwrap();

    let head = store.head(&id).await.unwrap().unwrap();

    assert_eq!(head.id, id);
    assert_eq!(
        (head.project_id.as_str(), head.rojo.as_str()),
        ("demo", "reader")
    );
    assert_eq!(head.message_count, 1);
    let unknown = rojos_conversations::ConversationId::generate();
    assert_eq!(store.head(&unknown).await.unwrap(), None);
}

/// The schema of version 1 exactly as it shipped (`MIGRATIONS[0]`).
const VERSION_1: &str = "CREATE TABLE conversations (
        id            TEXT PRIMARY KEY NOT NULL,
        project_id    TEXT NOT NULL,
        rojo          TEXT NOT NULL,
        title         TEXT,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        activity      INTEGER NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0,
        step_count    INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX conversations_by_project_activity
        ON conversations (project_id, activity);
    CREATE TABLE messages (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        step            INTEGER NOT NULL,
        json            TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    ) STRICT;
    PRAGMA user_version = 1;";

/// Writes a version-1 file holding conversation `id` with `messages` (one per step).
fn version_1_file(path: &std::path::Path, id: &str, messages: &[Value]) {
    let conn = raw(path);
    conn.execute_batch(VERSION_1).unwrap();
    conn.execute(
        "INSERT INTO conversations (id, project_id, rojo, created_at, updated_at, activity,
                                    message_count, step_count)
         VALUES (?1, 'demo', 'default', 0, 0, 1, ?2, ?2)",
        rusqlite::params![id, messages.len()],
    )
    .unwrap();
    for (seq, message) in messages.iter().enumerate() {
        conn.execute(
            "INSERT INTO messages (conversation_id, seq, step, json) VALUES (?1, ?2, ?2, ?3)",
            rusqlite::params![id, seq, message.to_string()],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO conversations (id, project_id, rojo, created_at, updated_at, activity)
         VALUES ('empty', 'demo', 'default', 0, 0, 2)",
        [],
    )
    .unwrap();
}

#[tokio::test]
async fn migrating_a_version_1_file_computes_the_stored_size_of_existing_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.db");
    let messages = vec![
        user("ünïcödé \u{1F980} and \"quotes\""),
        assistant("a reply"),
    ];
    version_1_file(&path, "old", &messages);

    let store = SqliteStore::open(&path).unwrap();

    let version: i64 = raw(&path)
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let old = rojos_conversations::ConversationId::parse("old").unwrap();
    let empty = rojos_conversations::ConversationId::parse("empty").unwrap();
    assert_eq!(
        store.head(&old).await.unwrap().unwrap().stored_bytes,
        bytes(&messages)
    );
    assert_eq!(store.head(&empty).await.unwrap().unwrap().stored_bytes, 0);
    // The migrated count and `append` agree: a fresh store holding the same messages has
    // the same size, and appending to the migrated one adds from the computed size on.
    let (_fresh_dir, fresh) = open_temp();
    let twin = fresh.create("demo", "default").await.unwrap();
    fresh.append(&twin, messages.clone()).await.unwrap();
    assert_eq!(
        fresh.head(&twin).await.unwrap().unwrap().stored_bytes,
        bytes(&messages)
    );
    store.append(&old, vec![user("more")]).await.unwrap();
    assert_eq!(
        store.head(&old).await.unwrap().unwrap().stored_bytes,
        bytes(&messages) + bytes(&[user("more")])
    );
}

on_both_backends!(
    each_step_adds_the_bytes_of_its_messages_json,
    a_refused_step_adds_nothing,
    head_reads_a_conversation_without_its_messages_and_none_for_an_unknown_id,
);
