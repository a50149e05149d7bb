//! Create, append and get: the stored history comes back exactly as appended,
//! in order, with its project, rojo and timestamps; a conversation created with its first
//! step is one created, then appended to.

use rojos_conversations::{ConversationId, Step, StoreError};
use serde_json::{json, Value};

use crate::support::{assistant, on_both_backends, user, Backend};

/// One chat turn with a tool call, as the agent loop would append it.
fn tool_turn() -> Vec<Vec<Value>> {
    vec![
        vec![user(
            "make a folder docs/intro, then list docs ✓ \"quoted\" \\ \u{1F980}",
        )],
        vec![
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "create_directory", "arguments": "{\"path\":\"docs/intro\"}"}
                }, {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "list_files", "arguments": "{\"path\":\"docs\"}"}
                }]
            }),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\":true}"}),
            json!({"role": "tool", "tool_call_id": "call_2",
                   "content": "[{\"name\":\"intro\",\"type\":\"directory\"}]"}),
        ],
        vec![json!({
            "role": "assistant",
            "content": "Done.",
            "x_numbers": [0, -1, 1.5, 0.1, 1e300, 18446744073709551615u64, -9223372036854775808i64],
            "x_nested": {"z": [], "a": {}, "m": [null, true, false, ""]}
        })],
    ]
}

async fn appended_steps_come_back_exactly_and_in_order(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    let steps = tool_turn();
    for step in &steps {
        store.append(&id, step.clone()).await.unwrap();
    }

    let conversation = store.get(&id).await.unwrap().unwrap();

    let expected: Vec<Value> = steps.into_iter().flatten().collect();
    assert_eq!(conversation.messages, expected);
    assert_eq!(conversation.id, id);
    assert_eq!(conversation.rojo, "default");
}

async fn a_new_conversation_is_empty_and_gets_a_22_character_base62_id(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "writer").await.unwrap();

    assert_eq!(id.as_str().len(), 22);
    assert!(id.as_str().bytes().all(|b| b.is_ascii_alphanumeric()));
    let conversation = store.get(&id).await.unwrap().unwrap();
    assert!(conversation.messages.is_empty());
    assert_eq!(conversation.rojo, "writer");
    assert_eq!(conversation.created_at, conversation.updated_at);
}

async fn appending_moves_updated_at_forward_but_not_created_at(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    let before = store.get(&id).await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    store.append(&id, vec![user("hi")]).await.unwrap();

    let after = store.get(&id).await.unwrap().unwrap();
    assert_eq!(after.created_at, before.created_at);
    assert!(after.updated_at > before.updated_at);
}

async fn a_conversation_is_returned_with_the_project_it_was_created_in(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let alpha = store.create("alpha", "default").await.unwrap();
    let beta = store.create("beta", "default").await.unwrap();

    assert_eq!(
        store.get(&alpha).await.unwrap().unwrap().project_id,
        "alpha"
    );
    assert_eq!(store.get(&beta).await.unwrap().unwrap().project_id, "beta");
}

async fn getting_an_unknown_id_returns_none(backend: Backend) {
    let (_fx, store) = backend.open().await;
    store.create("demo", "default").await.unwrap();
    let unknown = ConversationId::parse("no-such-conversation").unwrap();

    assert_eq!(store.get(&unknown).await.unwrap(), None);
}

async fn appending_to_an_unknown_id_is_not_found(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let unknown = ConversationId::parse("no-such-conversation").unwrap();

    let err = store.append(&unknown, vec![user("hi")]).await.unwrap_err();

    assert!(matches!(err, StoreError::NotFound { ref id } if *id == unknown));
    assert_eq!(
        err.to_string(),
        "conversation 'no-such-conversation' not found"
    );
    let err = store.append(&unknown, vec![]).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }));
}

async fn a_conversation_created_with_its_first_step_reads_as_one_created_then_appended(
    backend: Backend,
) {
    let (_fx, store) = backend.open().await;
    let steps = tool_turn();
    let apart = store.create("demo", "default").await.unwrap();
    for step in &steps {
        store.append(&apart, step.clone()).await.unwrap();
    }
    let first = Step::new(&steps[0]).unwrap();
    let together = store.create_with("demo", "default", first).await.unwrap();
    for step in &steps[1..] {
        store.append(&together, step.clone()).await.unwrap();
    }

    let (a, t) = (
        store.get(&apart).await.unwrap().unwrap(),
        store.get(&together).await.unwrap().unwrap(),
    );
    assert_eq!(t.messages, a.messages);
    assert_eq!(t.stored_bytes, a.stored_bytes);
    assert_eq!(t.project_id, "demo");
    let (ha, ht) = (
        store.head(&apart).await.unwrap().unwrap(),
        store.head(&together).await.unwrap().unwrap(),
    );
    assert_eq!(ht.message_count, ha.message_count);
    assert_eq!(ht.message_count, 5);
    let titles: Vec<_> = store
        .list("demo", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|summary| summary.title)
        .collect();
    assert_eq!(titles.len(), 2);
    assert_eq!(titles[0], titles[1]);
    assert!(titles[0]
        .as_deref()
        .unwrap()
        .starts_with("make a folder docs/intro"));
    // The steps are numbered alike: pages and a replacement from the second step agree.
    for from in 0..5 {
        let (pa, pt) = (
            store.page(&apart, from, 150).await.unwrap().unwrap(),
            store.page(&together, from, 150).await.unwrap().unwrap(),
        );
        assert_eq!(
            (pt.messages, pt.next),
            (pa.messages, pa.next),
            "from {from}"
        );
    }
    let redone = Step::new(&[assistant("redone")]).unwrap();
    store.replace_from(&apart, 1, redone.clone()).await.unwrap();
    store.replace_from(&together, 1, redone).await.unwrap();
    assert_eq!(
        store.get(&together).await.unwrap().unwrap().messages,
        store.get(&apart).await.unwrap().unwrap().messages
    );
}

#[test]
fn ids_of_unsafe_shapes_are_rejected_before_reaching_the_store() {
    let long = "a".repeat(65);
    for bad in ["", "../x", "a/b", "a b", "a.b", "ünï", "%41", long.as_str()] {
        let err = bad.parse::<ConversationId>().unwrap_err();
        assert!(matches!(err, StoreError::InvalidId { .. }), "{bad:?}");
    }
    assert!("Abc-123_x".parse::<ConversationId>().is_ok());
}

async fn a_conversation_serializes_with_camel_case_keys_and_rfc3339_times(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("hi"), assistant("hello")])
        .await
        .unwrap();

    let conversation = store.get(&id).await.unwrap().unwrap();
    let json = serde_json::to_value(&conversation).unwrap();

    assert_eq!(json["id"], id.as_str());
    assert_eq!(json["projectId"], "demo");
    assert_eq!(json["messages"], json!([user("hi"), assistant("hello")]));
    let created = json["createdAt"].as_str().unwrap();
    assert!(created.ends_with('Z') && created.contains('T'), "{created}");
}

on_both_backends!(
    appended_steps_come_back_exactly_and_in_order,
    a_new_conversation_is_empty_and_gets_a_22_character_base62_id,
    appending_moves_updated_at_forward_but_not_created_at,
    a_conversation_is_returned_with_the_project_it_was_created_in,
    getting_an_unknown_id_returns_none,
    appending_to_an_unknown_id_is_not_found,
    a_conversation_serializes_with_camel_case_keys_and_rfc3339_times,
    a_conversation_created_with_its_first_step_reads_as_one_created_then_appended,
);
