//! A PostgreSQL server that keeps its connections open but stops answering (hung, or its
//! machine lost without closing them): every store and lease call fails as unavailable
//! once `query_timeout` has passed, instead of waiting for the kernel to give the
//! connection up, and the store works again as soon as the server answers. The server is
//! frozen with SIGSTOP, on a cluster of this test's own (freezing the shared one would stall
//! the other tests).

use std::time::Duration;

use rojos_conversations::test_cluster::PgCluster;
use rojos_conversations::{
    ConversationStore, PostgresOptions, PostgresStore, RunLeases, StoreError,
};

use crate::support::{chain, user};

/// Far above the one-second query time-out: reaching it means the call waited for the
/// server, not for the time-out.
const GIVE_UP: Duration = Duration::from_secs(60);

async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GIVE_UP, call)
        .await
        .unwrap_or_else(|_| panic!("{what} still waiting for a frozen server after {GIVE_UP:?}"))
}

fn assert_no_answer(err: &StoreError, action: &str) {
    let text = chain(err);
    assert!(matches!(err, StoreError::Unavailable { .. }), "{text}");
    assert!(text.contains(action), "{text}");
    assert!(
        text.contains("the database gave no answer within 1 s ([store] query_timeout_secs)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_is_unavailable_after_the_query_timeout_then_serves_again() {
    let cluster = PgCluster::start().expect("a throwaway PostgreSQL cluster");
    let database = cluster.create_database().unwrap();
    let mut options = PostgresOptions::from_url(&cluster.url(&database))
        .unwrap()
        .with_password(&cluster.password());
    options.query_timeout = Duration::from_secs(1);
    let store = PostgresStore::connect(&options).await.unwrap();
    let leases = store.run_leases();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("before")]).await.unwrap();

    cluster.pause_server().unwrap();
    let appended = bounded("append", store.append(&id, vec![user("lost?")])).await;
    let read = bounded("head", store.head(&id)).await;
    let pinged = bounded("ping", store.ping()).await;
    let leased = bounded("lease", leases.acquire(&id, Duration::from_secs(30))).await;
    cluster.resume_server().unwrap();

    assert_no_answer(
        &appended.unwrap_err(),
        &format!("append to conversation '{id}'"),
    );
    assert_no_answer(&read.unwrap_err(), &format!("read conversation '{id}'"));
    assert_no_answer(&pinged.unwrap_err(), "reach the database");
    assert_no_answer(
        &leased.unwrap_err(),
        &format!("take the run lease of conversation '{id}'"),
    );
    // Back without a restart. The append that got no answer was sent whole: the server
    // stored it or not, never a part of it.
    bounded("append after", store.append(&id, vec![user("after")]))
        .await
        .unwrap();
    let messages = bounded("get after", store.get(&id))
        .await
        .unwrap()
        .unwrap()
        .messages;
    assert_eq!(messages.first(), Some(&user("before")));
    assert_eq!(messages.last(), Some(&user("after")));
    assert!(
        messages.len() == 2 || messages[1] == user("lost?"),
        "{messages:?}"
    );
    assert!(
        bounded("lease after", leases.acquire(&id, Duration::from_secs(30)))
            .await
            .unwrap()
            .is_some()
    );
}
