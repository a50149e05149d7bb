//! Compactions: a summary kept beside a conversation's messages, read back in order, the
//! first saved for the same messages kept, dropped when a covered message is replaced or the
//! conversation deleted, never kept for messages that are not stored; a run resumes from the
//! newest one, reading only the messages after what it covers.

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

async fn a_run_resumes_from_the_newest_summary_and_reads_only_what_follows_it(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let id = store.create("demo", "default").await.unwrap();
    // Without a summary: every message, from the first.
    store
        .append(&id, vec![user("q0"), assistant("a0")])
        .await
        .unwrap();
    let whole = store.resume(&id).await.unwrap().unwrap();
    assert_eq!(whole.compaction, None);
    assert_eq!(whole.from(), 0);
    assert_eq!(whole.messages, [user("q0"), assistant("a0")]);
    assert_eq!(whole.head, store.head(&id).await.unwrap().unwrap());

    for n in 1..4 {
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
        .save_compaction(&id, &compaction(6, "newest"))
        .await
        .unwrap();
    store
        .save_compaction(&id, &compaction(4, "between"))
        .await
        .unwrap();
    let resumed = store.resume(&id).await.unwrap().unwrap();
    assert_eq!(resumed.compaction, Some(compaction(6, "newest")));
    assert_eq!(resumed.from(), 6);
    assert_eq!(resumed.messages, [user("q3"), assistant("a3")]);
    // The head is the whole conversation's: every message counted and sized.
    let head = store.head(&id).await.unwrap().unwrap();
    assert_eq!(resumed.head, head);
    assert_eq!(head.message_count, 8);
    // The whole history is still there for everything else.
    assert_eq!(store.get(&id).await.unwrap().unwrap().messages.len(), 8);

    // A summary covering every message: nothing after it.
    store
        .save_compaction(&id, &compaction(8, "all"))
        .await
        .unwrap();
    let all = store.resume(&id).await.unwrap().unwrap();
    assert_eq!(all.compaction, Some(compaction(8, "all")));
    assert!(all.messages.is_empty());

    // Replacing covered messages drops their summaries: the run reads from the one left.
    let edited = Step::new(&[user("q2 edited")]).unwrap();
    store.replace_from(&id, 4, edited).await.unwrap();
    let after = store.resume(&id).await.unwrap().unwrap();
    assert_eq!(after.compaction, Some(compaction(4, "between")));
    assert_eq!(after.messages, [user("q2 edited")]);

    assert!(store
        .resume(&ConversationId::generate())
        .await
        .unwrap()
        .is_none());
}

on_both_backends!(
    summaries_are_kept_in_order_and_the_first_for_the_same_messages_wins,
    replacing_a_covered_message_drops_its_summary,
    a_run_resumes_from_the_newest_summary_and_reads_only_what_follows_it,
);
