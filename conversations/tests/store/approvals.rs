//! Approvals (`rojos_conversations::Approvals`), the same tests on both stores: a call asked
//! is pending until one decision is taken; a second decision, a decision for a call never
//! asked, and a decision after the run gave up are refused with the state they found; giving
//! up after a decision keeps the decision; "approve always" is remembered per conversation
//! and tool; deleting a conversation deletes its approvals.

use std::sync::Arc;

use rojos_conversations::{
    ApprovalState, Approvals, ConversationStore, Decided, Decision, GaveUp, PostgresStore,
    SqliteStore,
};

use crate::support::{db_path, on_both_backends, pg_options, Backend, Fixture};

on_both_backends!(
    one_decision_is_taken_and_a_second_is_refused_with_the_first,
    giving_up_ends_a_pending_call_but_not_a_decided_one,
    approve_always_is_remembered_per_conversation_and_tool,
    deleting_a_conversation_deletes_its_approvals,
);

async fn open(backend: Backend) -> (Fixture, Arc<dyn ConversationStore>, Arc<dyn Approvals>) {
    let (fixture, store) = backend.open().await;
    let approvals: Arc<dyn Approvals> = match &fixture {
        Fixture::Sqlite(dir) => Arc::new(SqliteStore::open(db_path(dir)).unwrap().approvals()),
        Fixture::Postgres(database) => Arc::new(
            PostgresStore::open(&pg_options(database))
                .unwrap()
                .approvals(),
        ),
    };
    (fixture, store, approvals)
}

async fn one_decision_is_taken_and_a_second_is_refused_with_the_first(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    let deny = Decision::Deny {
        reason: Some("not now".into()),
    };
    assert_eq!(
        approvals
            .decide(&id, "c1", &Decision::Approve)
            .await
            .unwrap(),
        Decided::NotPending(None),
        "never asked"
    );
    approvals.ask(&id, "c1", "delete_path").await.unwrap();
    assert_eq!(
        approvals.state(&id, "c1").await.unwrap(),
        Some(ApprovalState::Pending)
    );
    assert_eq!(
        approvals.decide(&id, "c1", &deny).await.unwrap(),
        Decided::Recorded
    );
    assert_eq!(
        approvals
            .decide(&id, "c1", &Decision::Approve)
            .await
            .unwrap(),
        Decided::NotPending(Some(ApprovalState::Decided(deny.clone())))
    );
    assert_eq!(
        approvals.state(&id, "c1").await.unwrap(),
        Some(ApprovalState::Decided(deny))
    );
    // A call id asked again (providers may reuse ids in a later run) is pending again.
    approvals.ask(&id, "c1", "delete_path").await.unwrap();
    assert_eq!(
        approvals.state(&id, "c1").await.unwrap(),
        Some(ApprovalState::Pending)
    );
}

async fn giving_up_ends_a_pending_call_but_not_a_decided_one(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    approvals.ask(&id, "late", "move_path").await.unwrap();
    assert_eq!(
        approvals
            .give_up(&id, "late", GaveUp::TimedOut)
            .await
            .unwrap(),
        ApprovalState::TimedOut
    );
    assert_eq!(
        approvals
            .decide(&id, "late", &Decision::Approve)
            .await
            .unwrap(),
        Decided::NotPending(Some(ApprovalState::TimedOut))
    );
    approvals.ask(&id, "first", "move_path").await.unwrap();
    approvals
        .decide(&id, "first", &Decision::Approve)
        .await
        .unwrap();
    assert_eq!(
        approvals
            .give_up(&id, "first", GaveUp::Cancelled)
            .await
            .unwrap(),
        ApprovalState::Decided(Decision::Approve),
        "a decision that came first stands"
    );
}

async fn approve_always_is_remembered_per_conversation_and_tool(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let (a, b) = (
        store.create("demo", "default").await.unwrap(),
        store.create("demo", "default").await.unwrap(),
    );
    approvals.ask(&a, "c1", "delete_path").await.unwrap();
    assert!(!approvals.always_allowed(&a, "delete_path").await.unwrap());
    approvals
        .decide(&a, "c1", &Decision::ApproveAlways)
        .await
        .unwrap();
    assert!(approvals.always_allowed(&a, "delete_path").await.unwrap());
    assert!(!approvals.always_allowed(&a, "move_path").await.unwrap());
    assert!(!approvals.always_allowed(&b, "delete_path").await.unwrap());
    // An approval asked again under the same call id keeps the tool allowed.
    approvals.ask(&a, "c1", "move_path").await.unwrap();
    assert!(approvals.always_allowed(&a, "delete_path").await.unwrap());
}

async fn deleting_a_conversation_deletes_its_approvals(backend: Backend) {
    let (fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    approvals.ask(&id, "c1", "delete_path").await.unwrap();
    approvals
        .decide(&id, "c1", &Decision::ApproveAlways)
        .await
        .unwrap();
    assert!(store.delete(&id).await.unwrap());
    assert_eq!(fixture.query_i64("SELECT count(*) FROM approvals"), 0);
    assert_eq!(fixture.query_i64("SELECT count(*) FROM approved_tools"), 0);
}
