//! Run leases, the same tests on both implementations: `on_local::…` is `LocalRunLeases`
//! under tokio's paused clock, `on_postgres::…` is `PostgresRunLeases` on a database of the
//! throwaway server, whose clock cannot be paused: there, time "passes" by moving every
//! lease's expiry back in the table (`Leases::advance`), which is what the database sees
//! when that much time has passed. Plus what only a shared database has: hosts (two stores
//! on one database) see each other's leases, and a lease on no conversation is refused.

use std::sync::Arc;
use std::time::Duration;

use rojos_conversations::{
    ConversationId, ConversationStore, LocalRunLeases, PostgresStore, RunLeases, StoreError,
};

use crate::support::{cluster, pg_options, Backend, Fixture};

const TTL: Duration = Duration::from_secs(30);

/// Defines `on_local::NAME` and `on_postgres::NAME` for each `async fn NAME(Leases)` given.
macro_rules! on_both_lease_backends {
    ($($name:ident),* $(,)?) => {
        mod on_local {
            $(
                #[tokio::test(start_paused = true)]
                async fn $name() {
                    super::$name(super::Leases::local()).await
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Leases::postgres().await).await
                }
            )*
        }
    };
}

on_both_lease_backends!(
    a_held_lease_cannot_be_taken_until_it_is_released,
    an_expired_lease_can_be_taken_and_its_old_holder_can_neither_renew_nor_release_it,
    renewing_keeps_a_lease_past_its_first_expiry,
    a_lease_is_free_again_only_once_its_time_to_live_has_passed,
);

/// One implementation under test, and how to make conversations and let time pass for it.
struct Leases {
    leases: Arc<dyn RunLeases>,
    /// PostgreSQL only: the store whose conversations the leases reference.
    postgres: Option<(Fixture, Arc<dyn ConversationStore>)>,
}

impl Leases {
    fn local() -> Self {
        Self {
            leases: Arc::new(LocalRunLeases::new()),
            postgres: None,
        }
    }

    async fn postgres() -> Self {
        let (fixture, store) = Backend::Postgres.open().await;
        let Fixture::Postgres(database) = &fixture else {
            unreachable!("a PostgreSQL backend has a PostgreSQL fixture");
        };
        let store_here = PostgresStore::open(&pg_options(database)).unwrap();
        Self {
            leases: Arc::new(store_here.run_leases()),
            postgres: Some((fixture, store)),
        }
    }

    /// A conversation to take leases on (in the store, for PostgreSQL).
    async fn conversation(&self) -> ConversationId {
        match &self.postgres {
            None => ConversationId::generate(),
            Some((_, store)) => store.create("demo", "default").await.unwrap(),
        }
    }

    /// Lets `by` pass on the clock the leases expire by.
    async fn advance(&self, by: Duration) {
        match &self.postgres {
            None => tokio::time::advance(by).await,
            Some((fixture, _)) => fixture.execute(&format!(
                "UPDATE run_leases SET expires_at = expires_at - interval '{} milliseconds'",
                by.as_millis()
            )),
        }
    }
}

async fn a_held_lease_cannot_be_taken_until_it_is_released(leases: Leases) {
    let (a, b) = (leases.conversation().await, leases.conversation().await);
    let l = &leases.leases;
    let first = l.acquire(&a, TTL).await.unwrap().unwrap();
    assert_eq!(l.acquire(&a, TTL).await.unwrap(), None);
    assert!(
        l.acquire(&b, TTL).await.unwrap().is_some(),
        "other conversations are free"
    );
    l.release(&a, first).await.unwrap();
    assert!(l.acquire(&a, TTL).await.unwrap().is_some());
}

async fn an_expired_lease_can_be_taken_and_its_old_holder_can_neither_renew_nor_release_it(
    leases: Leases,
) {
    let a = leases.conversation().await;
    let l = &leases.leases;
    let old = l.acquire(&a, TTL).await.unwrap().unwrap();
    leases.advance(TTL).await;
    let new = l.acquire(&a, TTL).await.unwrap().unwrap();
    assert_ne!(old, new);
    assert!(!l.renew(&a, old, TTL).await.unwrap());
    l.release(&a, old).await.unwrap();
    assert_eq!(
        l.acquire(&a, TTL).await.unwrap(),
        None,
        "the new holder still has it"
    );
}

async fn renewing_keeps_a_lease_past_its_first_expiry(leases: Leases) {
    let a = leases.conversation().await;
    let l = &leases.leases;
    let holder = l.acquire(&a, TTL).await.unwrap().unwrap();
    for _ in 0..5 {
        leases.advance(TTL / 2).await;
        assert!(l.renew(&a, holder, TTL).await.unwrap());
    }
    assert_eq!(l.acquire(&a, TTL).await.unwrap(), None);
    leases.advance(TTL).await;
    assert!(!l.renew(&a, holder, TTL).await.unwrap(), "too late");
}

async fn a_lease_is_free_again_only_once_its_time_to_live_has_passed(leases: Leases) {
    let a = leases.conversation().await;
    let l = &leases.leases;
    l.acquire(&a, TTL).await.unwrap().unwrap();
    leases.advance(TTL - Duration::from_secs(1)).await;
    assert_eq!(l.acquire(&a, TTL).await.unwrap(), None, "not yet expired");
    leases.advance(Duration::from_secs(1)).await;
    assert!(l.acquire(&a, TTL).await.unwrap().is_some(), "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_sharing_a_database_share_its_leases() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    let host_a = PostgresStore::connect(&options).await.unwrap();
    let host_b = PostgresStore::open(&options).unwrap();
    let (leases_a, leases_b) = (host_a.run_leases(), host_b.run_leases());
    let id = host_a.create("demo", "default").await.unwrap();

    let held = leases_a.acquire(&id, TTL).await.unwrap().unwrap();
    assert_eq!(leases_b.acquire(&id, TTL).await.unwrap(), None);
    assert!(
        leases_b.renew(&id, held, TTL).await.unwrap(),
        "the holder, from any host"
    );
    leases_a.release(&id, held).await.unwrap();
    assert!(leases_b.acquire(&id, TTL).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_hosts_racing_for_one_lease_give_it_to_exactly_one() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    let first = PostgresStore::connect(&options).await.unwrap();
    let id = first.create("demo", "default").await.unwrap();
    let mut racers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (leases, id) = (
            PostgresStore::open(&options).unwrap().run_leases(),
            id.clone(),
        );
        racers.spawn(async move { leases.acquire(&id, TTL).await.unwrap() });
    }
    let won = racers.join_all().await.into_iter().flatten().count();
    assert_eq!(won, 1);
}

#[tokio::test]
async fn a_lease_on_a_conversation_that_does_not_exist_is_refused() {
    let database = cluster().create_database().unwrap();
    let store = PostgresStore::connect(&pg_options(&database))
        .await
        .unwrap();
    let missing = ConversationId::generate();
    let refused = store.run_leases().acquire(&missing, TTL).await.unwrap_err();
    assert!(
        matches!(&refused, StoreError::NotFound { id } if *id == missing),
        "{refused:?}"
    );
}
