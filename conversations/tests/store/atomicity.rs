//! A step is stored all or nothing: a failure partway through an append leaves
//! no message of that step behind, and the conversation carries on after it.

use rojos_conversations::StoreError;
use serde_json::json;

use crate::support::{assistant, chain, on_both_backends, user, Backend};

async fn a_step_failing_on_its_third_message_stores_none_of_it(backend: Backend) {
    let (fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("list docs")]).await.unwrap();
    // A trigger makes the database itself refuse one row mid-transaction, after
    // the step's first two rows were inserted.
    fx.refuse_boom();
    let step = vec![
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "[]"}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": "boom"}),
    ];

    let err = store.append(&id, step).await.unwrap_err();

    assert!(matches!(err, StoreError::Backend { .. }));
    let text = chain(&err);
    assert!(
        text.starts_with(&format!(
            "conversation store could not append to conversation '{id}'"
        )),
        "{text}"
    );
    assert!(text.contains("boom refused"), "{text}");
    let conversation = store.get(&id).await.unwrap().unwrap();
    assert_eq!(conversation.messages, vec![user("list docs")]);
    let rows = fx.query_i64("SELECT count(*) FROM messages");
    assert_eq!(rows, 1);
    let summary = &store.list("demo", 10).await.unwrap()[0];
    assert_eq!(summary.message_count, 1);
}

async fn the_conversation_continues_in_order_after_a_failed_step(backend: Backend) {
    let (fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("one")]).await.unwrap();
    fx.refuse_boom();
    store
        .append(&id, vec![assistant("two"), assistant("boom")])
        .await
        .unwrap_err();

    store
        .append(&id, vec![assistant("two"), user("three")])
        .await
        .unwrap();

    let messages = store.get(&id).await.unwrap().unwrap().messages;
    assert_eq!(messages, vec![user("one"), assistant("two"), user("three")]);
}

async fn a_step_with_a_message_that_is_not_an_object_is_refused_whole(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();

    let err = store
        .append(
            &id,
            vec![user("fine"), json!("just text"), assistant("fine")],
        )
        .await
        .unwrap_err();

    assert_eq!(
        err.to_string(),
        "message 1 of the appended step is not a JSON object"
    );
    assert!(store.get(&id).await.unwrap().unwrap().messages.is_empty());
}

async fn a_step_with_a_message_without_a_role_is_refused_whole(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();

    let err = store
        .append(&id, vec![user("fine"), json!({"content": "who am I"})])
        .await
        .unwrap_err();

    assert!(matches!(err, StoreError::InvalidMessage { index: 1, .. }));
    assert!(store.get(&id).await.unwrap().unwrap().messages.is_empty());
}

on_both_backends!(
    a_step_failing_on_its_third_message_stores_none_of_it,
    the_conversation_continues_in_order_after_a_failed_step,
    a_step_with_a_message_that_is_not_an_object_is_refused_whole,
    a_step_with_a_message_without_a_role_is_refused_whole,
);
