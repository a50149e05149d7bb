//! Approvals (`rojos_conversations::Approvals`), the same tests on both stores: a call asked
//! is pending until one decision is taken; a second decision, a decision for a call never
//! asked, and a decision after the run gave up are refused with the state they found; giving
//! up after a decision keeps the decision; a call id asked again is a call of its own, which
//! only its approval id decides, and never reopens the earlier one; a call id of any length
//! is kept and decided; "approve always" is remembered per conversation and tool; deleting a
//! conversation deletes its approvals.

use std::sync::Arc;

use rojos_conversations::{
    new_approval_id, ApprovalState, Approvals, ConversationId, ConversationStore, Decided,
    Decision, GaveUp, PostgresStore, SqliteStore,
};

use crate::support::{db_path, on_both_backends, pg_options, Backend, Fixture};

on_both_backends!(
    one_decision_is_taken_and_a_second_is_refused_with_the_first,
    giving_up_ends_a_pending_call_but_not_a_decided_one,
    approve_always_is_remembered_per_conversation_and_tool,
    always_allowed_tools_are_listed_and_can_be_taken_back,
    deleting_a_conversation_deletes_its_approvals,
    a_reused_call_id_is_a_call_of_its_own_that_only_its_approval_id_decides,
    a_call_id_of_any_length_is_kept_and_decided,
);

/// Asks for call `call_id` (tool `tool`) under a new approval id, which it returns.
async fn ask(
    approvals: &Arc<dyn Approvals>,
    conversation: &ConversationId,
    call_id: &str,
    tool: &str,
) -> String {
    let approval = new_approval_id();
    approvals
        .ask(conversation, &approval, call_id, tool)
        .await
        .unwrap();
    approval
}

fn recorded(approval: &str, call: &str) -> Decided {
    Decided::Recorded {
        approval_id: approval.to_owned(),
        call_id: call.to_owned(),
    }
}

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
    let c1 = ask(&approvals, &id, "c1", "delete_path").await;
    assert_eq!(
        approvals.state(&id, &c1).await.unwrap(),
        Some(ApprovalState::Pending)
    );
    assert_eq!(approvals.state(&id, "c1").await.unwrap(), None);
    assert_eq!(
        approvals.decide(&id, &c1, &deny).await.unwrap(),
        recorded(&c1, "c1")
    );
    for key in [c1.as_str(), "c1"] {
        assert_eq!(
            approvals
                .decide(&id, key, &Decision::Approve)
                .await
                .unwrap(),
            Decided::NotPending(Some(ApprovalState::Decided(deny.clone()))),
            "decided once, by approval id or call id"
        );
    }
    assert_eq!(
        approvals.state(&id, &c1).await.unwrap(),
        Some(ApprovalState::Decided(deny))
    );
    // A decision by call id (clients from before approval ids) when one call has it.
    let c2 = ask(&approvals, &id, "c2", "delete_path").await;
    assert_eq!(
        approvals
            .decide(&id, "c2", &Decision::Approve)
            .await
            .unwrap(),
        recorded(&c2, "c2")
    );
}

async fn giving_up_ends_a_pending_call_but_not_a_decided_one(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    let late = ask(&approvals, &id, "late", "move_path").await;
    assert_eq!(
        approvals
            .give_up(&id, &late, GaveUp::TimedOut)
            .await
            .unwrap(),
        ApprovalState::TimedOut
    );
    assert_eq!(
        approvals
            .decide(&id, &late, &Decision::Approve)
            .await
            .unwrap(),
        Decided::NotPending(Some(ApprovalState::TimedOut))
    );
    let first = ask(&approvals, &id, "first", "move_path").await;
    approvals
        .decide(&id, &first, &Decision::Approve)
        .await
        .unwrap();
    assert_eq!(
        approvals
            .give_up(&id, &first, GaveUp::Cancelled)
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
    let c1 = ask(&approvals, &a, "c1", "delete_path").await;
    assert!(!approvals.always_allowed(&a, "delete_path").await.unwrap());
    approvals
        .decide(&a, &c1, &Decision::ApproveAlways)
        .await
        .unwrap();
    assert!(approvals.always_allowed(&a, "delete_path").await.unwrap());
    assert!(!approvals.always_allowed(&a, "move_path").await.unwrap());
    assert!(!approvals.always_allowed(&b, "delete_path").await.unwrap());
    // A call asked again under the same call id keeps the tool allowed.
    ask(&approvals, &a, "c1", "move_path").await;
    assert!(approvals.always_allowed(&a, "delete_path").await.unwrap());
}

async fn always_allowed_tools_are_listed_and_can_be_taken_back(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let (a, b) = (
        store.create("demo", "default").await.unwrap(),
        store.create("demo", "default").await.unwrap(),
    );
    assert!(approvals.always_allowed_tools(&a).await.unwrap().is_empty());
    for (call, tool) in [("c1", "move_path"), ("c2", "delete_path")] {
        let asked = ask(&approvals, &a, call, tool).await;
        approvals
            .decide(&a, &asked, &Decision::ApproveAlways)
            .await
            .unwrap();
    }
    let b1 = ask(&approvals, &b, "c1", "write_text_content").await;
    approvals
        .decide(&b, &b1, &Decision::ApproveAlways)
        .await
        .unwrap();
    assert_eq!(
        approvals.always_allowed_tools(&a).await.unwrap(),
        ["delete_path", "move_path"],
        "by name, this conversation's only"
    );
    assert!(approvals.revoke_always(&a, "delete_path").await.unwrap());
    assert!(!approvals.always_allowed(&a, "delete_path").await.unwrap());
    assert!(
        !approvals.revoke_always(&a, "delete_path").await.unwrap(),
        "taken back once"
    );
    assert!(!approvals
        .revoke_always(&a, "write_text_content")
        .await
        .unwrap());
    assert_eq!(
        approvals.always_allowed_tools(&a).await.unwrap(),
        ["move_path"]
    );
    assert_eq!(
        approvals.always_allowed_tools(&b).await.unwrap(),
        ["write_text_content"],
        "another conversation keeps its own"
    );
}

async fn deleting_a_conversation_deletes_its_approvals(backend: Backend) {
    let (fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    let c1 = ask(&approvals, &id, "c1", "delete_path").await;
    approvals
        .decide(&id, &c1, &Decision::ApproveAlways)
        .await
        .unwrap();
    assert!(store.delete(&id).await.unwrap());
    assert_eq!(fixture.query_i64("SELECT count(*) FROM approvals"), 0);
    assert_eq!(fixture.query_i64("SELECT count(*) FROM approved_tools"), 0);
}

async fn a_reused_call_id_is_a_call_of_its_own_that_only_its_approval_id_decides(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    let write = ask(&approvals, &id, "dup", "write_text_content").await;
    assert_eq!(
        approvals
            .decide(&id, &write, &Decision::Approve)
            .await
            .unwrap(),
        recorded(&write, "dup")
    );
    // The model's next turn reuses the id for another call.
    let delete = ask(&approvals, &id, "dup", "delete_path").await;
    assert_eq!(
        approvals.state(&id, &write).await.unwrap(),
        Some(ApprovalState::Decided(Decision::Approve)),
        "asking again never reopens the earlier call"
    );
    // The first decision sent again (a retry, a double click) approves nothing.
    assert_eq!(
        approvals
            .decide(&id, "dup", &Decision::Approve)
            .await
            .unwrap(),
        Decided::Ambiguous
    );
    assert_eq!(
        approvals
            .decide(&id, &write, &Decision::Approve)
            .await
            .unwrap(),
        Decided::NotPending(Some(ApprovalState::Decided(Decision::Approve)))
    );
    assert_eq!(
        approvals.state(&id, &delete).await.unwrap(),
        Some(ApprovalState::Pending)
    );
    let deny = Decision::Deny { reason: None };
    assert_eq!(
        approvals.decide(&id, &delete, &deny).await.unwrap(),
        recorded(&delete, "dup")
    );
    assert_eq!(
        approvals.state(&id, &delete).await.unwrap(),
        Some(ApprovalState::Decided(deny))
    );
}

async fn a_call_id_of_any_length_is_kept_and_decided(backend: Backend) {
    let (_fixture, store, approvals) = open(backend).await;
    let id = store.create("demo", "default").await.unwrap();
    // Longer than a PostgreSQL B-tree entry may be (about 2.7 kB).
    let long = format!("call_{}", "x".repeat(8_000));
    let by_call = ask(&approvals, &id, &long, "delete_path").await;
    assert_eq!(
        approvals
            .decide(&id, &long, &Decision::Approve)
            .await
            .unwrap(),
        recorded(&by_call, &long)
    );
    let by_approval = ask(&approvals, &id, &long, "delete_path").await;
    assert_eq!(
        approvals
            .decide(&id, &by_approval, &Decision::Approve)
            .await
            .unwrap(),
        recorded(&by_approval, &long)
    );
}
