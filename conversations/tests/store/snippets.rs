//! A search hit's snippet, on both backends: the first user or assistant message holding
//! the searched text (tool results never), the text around its first match split into
//! before / match / after, the same shape from both stores; none for a hit by title only.

use rojos_conversations::Snippet;
use serde_json::json;

use crate::support::{assistant, on_both_backends, user, Backend};

async fn a_hit_shows_its_first_matching_message_around_the_match(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    let long = "The plan, step by step: first we read every chapter of the manual, then \
                we write the Kettle section again, and last we check the links twice \
                before Monday morning.";
    store
        .append(
            &id,
            vec![
                user("list the files"),
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "c1", "type": "function",
                    "function": {"name": "list_files", "arguments": "{}"}}]}),
                json!({"role": "tool", "tool_call_id": "c1", "content": "kettle.md"}),
                assistant(long),
            ],
        )
        .await
        .unwrap();
    store
        .append(&id, vec![user("and the kettle again")])
        .await
        .unwrap();

    let found = store.search("demo", "KETTLE", 10).await.unwrap();

    assert_eq!(found.len(), 1);
    let snippet = found[0].snippet.clone().expect("a message matched");
    // Message 2 (the tool result) holds the text too, but tool results are not searched.
    assert_eq!(snippet.message, 3);
    assert_eq!(snippet.matched, "Kettle");
    assert!(snippet.before.starts_with('…'), "{snippet:?}");
    assert!(snippet.before.ends_with("we write the "), "{snippet:?}");
    assert!(snippet.after.starts_with(" section again,"), "{snippet:?}");
    assert!(snippet.after.ends_with('…'), "{snippet:?}");
    let shown = format!("{}{}{}", snippet.before, snippet.matched, snippet.after);
    assert!(shown.chars().count() < long.chars().count(), "{shown}");
    // The JSON shape a client reads.
    let value = serde_json::to_value(&found[0]).unwrap();
    assert_eq!(value["id"], id.as_str());
    assert_eq!(value["snippet"]["match"], "Kettle");
    assert_eq!(value["snippet"]["message"], 3);
}

async fn a_hit_by_its_title_only_has_no_snippet(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let by_title = store.create("demo", "default").await.unwrap();
    store.append(&by_title, vec![user("hello")]).await.unwrap();
    store.rename(&by_title, Some("Kettle notes")).await.unwrap();
    let short = store.create("demo", "default").await.unwrap();
    store
        .append(&short, vec![user("ok then"), assistant("ok")])
        .await
        .unwrap();

    let found = store.search("demo", "kettle", 10).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].conversation.id, by_title);
    assert_eq!(found[0].snippet, None);
    assert_eq!(
        serde_json::to_value(&found[0]).unwrap()["snippet"],
        serde_json::Value::Null
    );
    // Too short for the messages to be searched: titles only, no snippet.
    let found = store.search("demo", "ok", 10).await.unwrap();
    assert!(found.iter().all(|hit| hit.snippet.is_none()), "{found:?}");
}

async fn a_snippet_keeps_markup_as_text_and_joins_lines(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(
            &id,
            vec![json!({"role": "user", "content": [
                {"type": "text", "text": "look at\n\n<img src=x onerror=alert(1)>"},
                {"type": "text", "text": "then <b>this</b>"}
            ]})],
        )
        .await
        .unwrap();

    let found = store.search("demo", "<IMG src", 10).await.unwrap();

    assert_eq!(
        found[0].snippet,
        Some(Snippet {
            message: 0,
            before: "look at ".to_owned(),
            matched: "<img src".to_owned(),
            after: "=x onerror=alert(1)> then <b>this</b>".to_owned(),
        })
    );
}

on_both_backends!(
    a_hit_shows_its_first_matching_message_around_the_match,
    a_hit_by_its_title_only_has_no_snippet,
    a_snippet_keeps_markup_as_text_and_joins_lines,
);
