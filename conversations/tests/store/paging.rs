//! Reading a conversation a page at a time: every message exactly once and in order,
//! each page within its byte budget counted as a JSON array, a message larger than the
//! budget alone on its page, and only the page's own rows read.

use rojos_conversations::{ConversationId, ConversationStore, StoreError};
use serde_json::Value;

use crate::support::{assistant, on_both_backends, user, Backend};

/// A conversation of `texts`, alternating user and assistant, one step each.
async fn conversation(
    store: &dyn ConversationStore,
    texts: &[String],
) -> (ConversationId, Vec<Value>) {
    let id = store.create("demo", "default").await.unwrap();
    let mut all = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let message = if i % 2 == 0 {
            user(text)
        } else {
            assistant(text)
        };
        store.append(&id, vec![message.clone()]).await.unwrap();
        all.push(message);
    }
    (id, all)
}

/// Sizes that do not line up with the budget, and one message over it.
fn texts() -> Vec<String> {
    (0..23)
        .map(|i| match i {
            9 => "x".repeat(5000),
            _ => format!("message {i} {}", "y".repeat(37 * i % 300)),
        })
        .collect()
}

async fn pages_return_every_message_once_in_order_within_the_budget(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let (id, all) = conversation(store.as_ref(), &texts()).await;
    let budget = 1024;

    let mut read = Vec::new();
    let mut from = 0;
    let mut pages = 0;
    loop {
        let page = store.page(&id, from, budget).await.unwrap().unwrap();
        assert!(
            !page.messages.is_empty(),
            "a page before the end is never empty"
        );
        let size = serde_json::to_string(&page.messages).unwrap().len();
        assert!(
            size <= budget || page.messages.len() == 1,
            "page from {from} is {size} bytes with {} messages",
            page.messages.len()
        );
        assert_eq!(page.head.message_count, all.len() as u64);
        pages += 1;
        read.extend(page.messages.iter().cloned());
        match page.next {
            Some(next) => {
                assert_eq!(next, from + page.messages.len() as u64);
                from = next;
            }
            None => break,
        }
    }

    assert_eq!(read, all);
    assert!(
        pages > 3,
        "the budget splits the conversation: {pages} pages"
    );
}

async fn a_message_larger_than_the_budget_is_alone_on_its_page(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let big = "x".repeat(5000);
    let (id, all) = conversation(store.as_ref(), &["a".to_owned(), big, "b".to_owned()]).await;

    let first = store.page(&id, 0, 1024).await.unwrap().unwrap();
    assert_eq!(first.messages, all[..1]);
    assert_eq!(first.next, Some(1));
    let big_page = store.page(&id, 1, 1024).await.unwrap().unwrap();
    assert_eq!(big_page.messages, all[1..2]);
    assert_eq!(big_page.next, Some(2));
    let last = store.page(&id, 2, 1024).await.unwrap().unwrap();
    assert_eq!((last.messages.as_slice(), last.next), (&all[2..], None));
}

async fn a_budget_that_fits_everything_gives_one_page(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let (id, all) = conversation(store.as_ref(), &texts()).await;
    let exact = serde_json::to_string(&all).unwrap().len();

    let page = store.page(&id, 0, exact).await.unwrap().unwrap();
    assert_eq!((page.messages.len(), page.next), (all.len(), None));
    let short = store.page(&id, 0, exact - 1).await.unwrap().unwrap();
    assert_eq!(
        short.messages.len(),
        all.len() - 1,
        "one byte less leaves one out"
    );
    assert_eq!(short.next, Some(all.len() as u64 - 1));
}

async fn a_page_past_the_end_is_empty_and_an_unknown_id_is_none(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let (id, all) = conversation(store.as_ref(), &["a".to_owned(), "b".to_owned()]).await;
    for from in [all.len() as u64, 1000, u64::MAX] {
        let page = store.page(&id, from, 1024).await.unwrap().unwrap();
        assert_eq!((page.messages.len(), page.next), (0, None), "from {from}");
    }
    let empty = store.create("demo", "default").await.unwrap();
    let page = store.page(&empty, 0, 1024).await.unwrap().unwrap();
    assert_eq!((page.messages.len(), page.next), (0, None));
    assert_eq!(
        store
            .page(&ConversationId::generate(), 0, 1024)
            .await
            .unwrap(),
        None
    );
}

async fn a_page_reads_only_its_own_rows(backend: Backend) {
    let (fx, store) = backend.open().await;
    let texts: Vec<String> = (0..6).map(|i| format!("message {i}")).collect();
    let (id, all) = conversation(store.as_ref(), &texts).await;
    // A row after the first page that is not JSON: reading it would fail.
    fx.execute("UPDATE messages SET json = 'not json' WHERE seq = 4");
    let budget = serde_json::to_string(&all[..2]).unwrap().len();

    let page = store.page(&id, 0, budget).await.unwrap().unwrap();

    assert_eq!((page.messages.as_slice(), page.next), (&all[..2], Some(2)));
    let err = store.page(&id, 4, budget).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("conversation database holds a corrupt row: conversation '{id}' message 4 is not valid JSON")
    );
}

on_both_backends!(
    pages_return_every_message_once_in_order_within_the_budget,
    a_message_larger_than_the_budget_is_alone_on_its_page,
    a_budget_that_fits_everything_gives_one_page,
    a_page_past_the_end_is_empty_and_an_unknown_id_is_none,
    a_page_reads_only_its_own_rows,
);
