//! The PostgreSQL store with unnamed statements (`StatementMode::Unnamed`, `[store]
//! prepared_statements = false`, for transaction poolers): every kind of statement it sends
//! (conversations, search, run leases, approvals) works as with prepared ones. (That they
//! survive a transaction pooler is `host/tests/e2e/pgbouncer.rs`.)

use std::time::Duration;

use rojos_conversations::{
    ApprovalState, Approvals, ConversationStore, Decision, PostgresStore, RunLeases, StatementMode,
    Step,
};

use crate::support::{assistant, cluster, pg_options, user};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_works_unnamed() {
    let database = cluster().create_database().unwrap();
    let mut options = pg_options(&database);
    options.statements = StatementMode::Unnamed;
    options.pool_size = 1;
    let store = PostgresStore::connect(&options).await.unwrap();

    let id = store
        .create_with(
            "demo",
            "default",
            Step::new(&[user("find the kettle")]).unwrap(),
        )
        .await
        .unwrap();
    store
        .append(&id, vec![assistant("it is here")])
        .await
        .unwrap();
    store.append(&id, vec![]).await.unwrap();
    store
        .replace_from(&id, 1, Step::new(&[assistant("over there")]).unwrap())
        .await
        .unwrap();
    store.rename(&id, Some("Kitchen")).await.unwrap();
    assert_eq!(store.head(&id).await.unwrap().unwrap().message_count, 2);
    assert_eq!(store.get(&id).await.unwrap().unwrap().messages.len(), 2);
    let page = store.page(&id, 1, 1 << 20).await.unwrap().unwrap();
    assert_eq!(page.messages, vec![assistant("over there")]);
    assert_eq!(store.list("demo", 10).await.unwrap().len(), 1);
    assert_eq!(
        store.search("demo", "OVER THERE", 10).await.unwrap().len(),
        1
    );
    assert_eq!(store.search("demo", "ki", 10).await.unwrap().len(), 1);

    let leases = store.run_leases();
    let holder = leases
        .acquire(&id, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("free");
    assert!(leases
        .renew(&id, holder, Duration::from_secs(60))
        .await
        .unwrap());
    leases.release(&id, holder).await.unwrap();

    let approvals = store.approvals();
    approvals
        .ask(&id, "approval_1", "call_1", "delete_path")
        .await
        .unwrap();
    approvals
        .decide(&id, "approval_1", &Decision::ApproveAlways)
        .await
        .unwrap();
    assert_eq!(
        approvals.state(&id, "approval_1").await.unwrap(),
        Some(ApprovalState::Decided(Decision::ApproveAlways))
    );
    assert!(approvals.always_allowed(&id, "delete_path").await.unwrap());

    assert!(store.delete(&id).await.unwrap());
    assert!(store.list("demo", 10).await.unwrap().is_empty());
}
