//! A project's conversation list: newest activity first, with titles taken from
//! the first user message, message counts, a limit, and no other project's rows.

use rojos_conversations::TITLE_MAX_CHARS;
use serde_json::json;

use crate::support::{assistant, on_both_backends, user, Backend};

async fn the_most_recently_updated_conversation_is_listed_first(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let a = store.create("demo", "default").await.unwrap();
    let b = store.create("demo", "default").await.unwrap();
    let c = store.create("demo", "default").await.unwrap();

    store.append(&a, vec![user("a again")]).await.unwrap();

    let ids: Vec<_> = store
        .list("demo", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, [a, c, b]);
}

async fn titles_come_from_the_first_user_message_and_are_cut_to_80_characters(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let short = store.create("demo", "default").await.unwrap();
    store
        .append(&short, vec![user("  make a\ndocs  folder ")])
        .await
        .unwrap();
    store
        .append(&short, vec![assistant("ok"), user("later question")])
        .await
        .unwrap();
    let long = store.create("demo", "default").await.unwrap();
    store
        .append(&long, vec![user(&"word ".repeat(40))])
        .await
        .unwrap();
    let untitled = store.create("demo", "other").await.unwrap();

    let summaries = store.list("demo", 10).await.unwrap();

    let by_id = |id| summaries.iter().find(|s| s.id == id).unwrap();
    assert_eq!(
        by_id(short.clone()).title.as_deref(),
        Some("make a docs folder")
    );
    assert_eq!(by_id(short).message_count, 3);
    let cut = by_id(long).title.clone().unwrap();
    assert_eq!(cut.chars().count(), TITLE_MAX_CHARS);
    assert!(
        cut.starts_with("word word") && cut.ends_with("word…"),
        "{cut}"
    );
    let empty = by_id(untitled);
    assert_eq!((empty.title.as_deref(), empty.message_count), (None, 0));
    assert_eq!(empty.rojo, "other");
}

async fn the_list_stops_at_the_limit(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(store.create("demo", "default").await.unwrap());
    }

    let listed: Vec<_> = store
        .list("demo", 2)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();

    assert_eq!(listed, [ids[4].clone(), ids[3].clone()]);
    assert!(store.list("demo", 0).await.unwrap().is_empty());
    assert_eq!(store.list("demo", usize::MAX).await.unwrap().len(), 5);
}

async fn a_project_lists_only_its_own_conversations(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let mine = store.create("alpha", "default").await.unwrap();
    store.create("beta", "default").await.unwrap();

    let listed = store.list("alpha", 10).await.unwrap();

    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, mine);
    assert!(store.list("gamma", 10).await.unwrap().is_empty());
}

async fn a_summary_serializes_with_camel_case_keys(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("hi")]).await.unwrap();

    let json = serde_json::to_value(&store.list("demo", 1).await.unwrap()[0]).unwrap();

    assert_eq!(json["id"], json!(id.as_str()));
    assert_eq!(json["title"], "hi");
    assert_eq!(json["messageCount"], 1);
    assert!(json["updatedAt"].is_string());
}

on_both_backends!(
    the_most_recently_updated_conversation_is_listed_first,
    titles_come_from_the_first_user_message_and_are_cut_to_80_characters,
    the_list_stops_at_the_limit,
    a_project_lists_only_its_own_conversations,
    a_summary_serializes_with_camel_case_keys,
);
