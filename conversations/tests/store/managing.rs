//! What the chat panel's sidebar and the chat's regenerate and edit do to stored
//! conversations: a title the user gives (checked, kept apart from the derived one), deleting
//! a conversation with its messages, searching titles and message text, and replacing the
//! messages from an index on with a new step, atomically.

use rojos_conversations::{ConversationId, Step, StoreError};
use serde_json::json;

use crate::support::{assistant, on_both_backends, user, Backend};

/// The step of `messages`, which the tests build valid.
fn step(messages: Vec<serde_json::Value>) -> Step {
    Step::new(&messages).unwrap()
}

fn ids(list: &[rojos_conversations::ConversationSummary]) -> Vec<ConversationId> {
    list.iter().map(|s| s.id.clone()).collect()
}

fn hit_ids(list: &[rojos_conversations::SearchHit]) -> Vec<ConversationId> {
    list.iter().map(|s| s.conversation.id.clone()).collect()
}

async fn a_given_title_overrides_the_derived_one_until_cleared(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let older = store.create("demo", "default").await.unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("first words")]).await.unwrap();
    store.append(&older, vec![user("older")]).await.unwrap();

    store.rename(&id, Some("  Plan for June ")).await.unwrap();
    let listed = store.list("demo", 10).await.unwrap();
    assert_eq!(
        ids(&listed),
        [older.clone(), id.clone()],
        "the order is kept"
    );
    assert_eq!(listed[1].title.as_deref(), Some("Plan for June"));

    store.rename(&id, None).await.unwrap();
    let listed = store.list("demo", 10).await.unwrap();
    assert_eq!(listed[1].title.as_deref(), Some("first words"));
}

async fn a_bad_title_or_an_unknown_conversation_changes_nothing(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("kept")]).await.unwrap();

    for bad in ["", "   ", "two\nlines", &"x".repeat(81)] {
        let err = store.rename(&id, Some(bad)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidTitle { .. }),
            "{bad:?}: {err}"
        );
    }
    let unknown = ConversationId::generate();
    let err = store.rename(&unknown, Some("x")).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    assert_eq!(
        store.list("demo", 1).await.unwrap()[0].title.as_deref(),
        Some("kept")
    );
}

async fn deleting_removes_the_conversation_and_its_messages_only(backend: Backend) {
    let (fx, store) = backend.open().await;
    let gone = store.create("demo", "default").await.unwrap();
    store
        .append(&gone, vec![user("bye"), assistant("ok")])
        .await
        .unwrap();
    let kept = store.create("demo", "default").await.unwrap();
    store.append(&kept, vec![user("stay")]).await.unwrap();

    assert!(store.delete(&gone).await.unwrap());
    assert!(!store.delete(&gone).await.unwrap(), "already gone");

    assert_eq!(store.get(&gone).await.unwrap(), None);
    assert_eq!(
        ids(&store.list("demo", 10).await.unwrap()),
        std::slice::from_ref(&kept)
    );
    assert_eq!(
        fx.query_i64(&format!(
            "SELECT count(*) FROM messages WHERE conversation_id = '{gone}'"
        )),
        0
    );
    assert_eq!(store.get(&kept).await.unwrap().unwrap().messages.len(), 1);
    let err = store.append(&gone, vec![user("late")]).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
}

async fn search_finds_titles_and_message_text_ignoring_case_newest_first(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let by_question = store.create("demo", "default").await.unwrap();
    store
        .append(&by_question, vec![user("Where is the README?")])
        .await
        .unwrap();
    let by_answer = store.create("demo", "default").await.unwrap();
    store
        .append(&by_answer, vec![user("hello"), assistant("see readme.md")])
        .await
        .unwrap();
    let by_title = store.create("demo", "default").await.unwrap();
    store.append(&by_title, vec![user("other")]).await.unwrap();
    store.rename(&by_title, Some("ReadMe plans")).await.unwrap();
    let by_tool = store.create("demo", "default").await.unwrap();
    store
        .append(
            &by_tool,
            vec![
                user("list"),
                json!({"role": "tool", "tool_call_id": "c1", "content": "README"}),
            ],
        )
        .await
        .unwrap();
    let elsewhere = store.create("other", "default").await.unwrap();
    store
        .append(&elsewhere, vec![user("readme")])
        .await
        .unwrap();

    let found = store.search("demo", "rEaDmE", 10).await.unwrap();

    // Tool results and other projects are not searched; activity orders the rest.
    assert_eq!(
        hit_ids(&found),
        [by_title.clone(), by_answer.clone(), by_question.clone()]
    );
    assert_eq!(found[0].conversation.title.as_deref(), Some("ReadMe plans"));
    assert_eq!(
        hit_ids(&store.search("demo", "readme", 2).await.unwrap()).len(),
        2
    );
    assert!(store
        .search("demo", "nowhere", 10)
        .await
        .unwrap()
        .is_empty());
    // Words the JSON holds around the text ("role", "content") are not the text.
    assert!(store.search("demo", "role", 10).await.unwrap().is_empty());
}

async fn search_takes_wildcards_and_quotes_literally(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let percent = store.create("demo", "default").await.unwrap();
    store
        .append(
            &percent,
            vec![user("100% done, a_b and \"quoted\" \\ back")],
        )
        .await
        .unwrap();
    let plain = store.create("demo", "default").await.unwrap();
    store
        .append(&plain, vec![user("1000 done, axb")])
        .await
        .unwrap();

    for text in ["100%", "a_b", "\"quoted\"", "\\ back"] {
        let found = store.search("demo", text, 10).await.unwrap();
        assert_eq!(hit_ids(&found), std::slice::from_ref(&percent), "{text}");
    }
    assert_eq!(store.search("demo", "%", 10).await.unwrap().len(), 1);
    assert_eq!(store.search("demo", "_", 10).await.unwrap().len(), 1);
}

async fn replacing_from_an_index_drops_the_rest_and_appends_the_step(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("one")]).await.unwrap();
    store
        .append(&id, vec![assistant("answer one")])
        .await
        .unwrap();
    store.append(&id, vec![user("two")]).await.unwrap();
    store
        .append(&id, vec![assistant("answer two"), assistant("more")])
        .await
        .unwrap();

    store
        .replace_from(&id, 2, step(vec![user("two, edited")]))
        .await
        .unwrap();
    store
        .append(&id, vec![assistant("new answer")])
        .await
        .unwrap();

    let conversation = store.get(&id).await.unwrap().unwrap();
    let expected = vec![
        user("one"),
        assistant("answer one"),
        user("two, edited"),
        assistant("new answer"),
    ];
    assert_eq!(conversation.messages, expected);
    let bytes: usize = expected.iter().map(|m| m.to_string().len()).sum();
    assert_eq!(conversation.stored_bytes, bytes as u64);
    let head = store.head(&id).await.unwrap().unwrap();
    assert_eq!(head.message_count, 4);
    assert_eq!(
        store.list("demo", 1).await.unwrap()[0].title.as_deref(),
        Some("one")
    );
}

async fn replacing_from_the_first_message_takes_the_new_title(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("typo"), assistant("?")])
        .await
        .unwrap();

    store
        .replace_from(&id, 0, step(vec![user("fixed")]))
        .await
        .unwrap();

    assert_eq!(
        store.get(&id).await.unwrap().unwrap().messages,
        vec![user("fixed")]
    );
    assert_eq!(
        store.list("demo", 1).await.unwrap()[0].title.as_deref(),
        Some("fixed")
    );
}

async fn a_refused_replacement_changes_nothing(backend: Backend) {
    let (fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("one"), assistant("two")])
        .await
        .unwrap();
    let before = store.get(&id).await.unwrap().unwrap();

    let past = store
        .replace_from(&id, 3, step(vec![user("x")]))
        .await
        .unwrap_err();
    assert_eq!(
        past.to_string(),
        format!("conversation '{id}' has 2 messages: it cannot be replaced from message 3")
    );
    let invalid = Step::new(&[json!("text")]);
    assert!(matches!(invalid, Err(StoreError::InvalidMessage { .. })));
    // The database refuses the new step midway: the deletion is rolled back with it.
    fx.refuse_boom();
    let refused = store.replace_from(&id, 1, step(vec![user("boom")])).await;
    assert!(
        matches!(refused, Err(StoreError::Backend { .. })),
        "{refused:?}"
    );
    let unknown = ConversationId::generate();
    let missing = store.replace_from(&unknown, 0, step(vec![user("x")])).await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })));

    let after = store.get(&id).await.unwrap().unwrap();
    assert_eq!(after.messages, before.messages);
    assert_eq!(after.stored_bytes, before.stored_bytes);
}

on_both_backends!(
    a_given_title_overrides_the_derived_one_until_cleared,
    a_bad_title_or_an_unknown_conversation_changes_nothing,
    deleting_removes_the_conversation_and_its_messages_only,
    search_finds_titles_and_message_text_ignoring_case_newest_first,
    search_takes_wildcards_and_quotes_literally,
    replacing_from_an_index_drops_the_rest_and_appends_the_step,
    replacing_from_the_first_message_takes_the_new_title,
    a_refused_replacement_changes_nothing,
);

/// SQLite folds case with Unicode's rules (`rojos_fold`); PostgreSQL as its locale does, and
/// the test server has none (`initdb --no-locale`), so this is SQLite's alone.
#[tokio::test]
async fn sqlite_search_ignores_case_beyond_ascii() {
    let (_fx, store) = Backend::Sqlite.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("ÉCOLE")]).await.unwrap();
    // In a message's text, not only in the title.
    store.append(&id, vec![assistant("Ünïcode")]).await.unwrap();
    assert_eq!(
        hit_ids(&store.search("demo", "école", 10).await.unwrap()),
        std::slice::from_ref(&id)
    );
    assert_eq!(
        hit_ids(&store.search("demo", "ünÏ", 10).await.unwrap()),
        [id]
    );
}
