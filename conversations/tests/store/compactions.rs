//! Compactions: a summary kept beside a conversation's messages, read back in order, the
//! first saved for the same messages kept, dropped when a covered message is replaced or the
//! conversation deleted, never kept for messages that are not stored.

use rojos_conversations::{Compaction, ConversationId, Step};

use crate::support::{assistant, on_both_backends, user, Backend};

fn compaction(covers: u64, summary: &str) -> Compaction {
    Compaction {
        covers,
        summary: summary.to_owned(),
    }
}

async fn summaries_are_kept_in_order_and_the_first_for_the_same_messages_wins(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    for n in 0..3 {
        store
            .append(
                &id,
                vec![user(&format!("q{n}")), assistant(&format!("a{n}"))],
            )
            .await
            .unwrap();
    }
    assert!(store.compactions(&id).await.unwrap().is_empty());

    store
        .save_compaction(&id, &compaction(4, "second"))
        .await
        .unwrap();
    store
        .save_compaction(&id, &compaction(2, "first"))
        .await
        .unwrap();
    // Another host summarised the same messages meanwhile: the one kept is reused.
    store
        .save_compaction(&id, &compaction(4, "again"))
        .await
        .unwrap();
    // More messages than are stored: nothing is kept.
    store
        .save_compaction(&id, &compaction(7, "past"))
        .await
        .unwrap();
    let unknown = ConversationId::generate();
    store
        .save_compaction(&unknown, &compaction(1, "x"))
        .await
        .unwrap();

    assert_eq!(
        store.compactions(&id).await.unwrap(),
        [compaction(2, "first"), compaction(4, "second")]
    );
    assert_eq!(store.get(&id).await.unwrap().unwrap().messages.len(), 6);
    assert!(store.compactions(&unknown).await.unwrap().is_empty());
}

async fn replacing_a_covered_message_drops_its_summary(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    for n in 0..3 {
        store
            .append(
                &id,
                vec![user(&format!("q{n}")), assistant(&format!("a{n}"))],
            )
            .await
            .unwrap();
    }
    store
        .save_compaction(&id, &compaction(2, "early"))
        .await
        .unwrap();
    store
        .save_compaction(&id, &compaction(4, "later"))
        .await
        .unwrap();

    let edited = Step::new(&[user("q1 edited")]).unwrap();
    store.replace_from(&id, 2, edited).await.unwrap();
    assert_eq!(
        store.compactions(&id).await.unwrap(),
        [compaction(2, "early")]
    );

    assert!(store.delete(&id).await.unwrap());
    assert!(store.compactions(&id).await.unwrap().is_empty());
}

on_both_backends!(
    summaries_are_kept_in_order_and_the_first_for_the_same_messages_wins,
    replacing_a_covered_message_drops_its_summary,
);
