//! The PostgreSQL schema's migration: recorded by version, idempotent, safe when several
//! hosts migrate at once, and refused (leaving the database alone) when a newer build
//! migrated it. The SQLite file's own migration is in `persistence`.

use std::sync::Arc;

use rojos_conversations::{
    ApprovalState, Approvals, ConversationHead, ConversationStore, Decided, Decision, Migration,
    PostgresStore, RunLeases, Step, StoreError, POSTGRES_SCHEMA_VERSION,
};

use crate::support::{chain, cluster, pg_options, user};

/// The one value `sql` selects in `database`, as text.
fn scalar(database: &str, sql: &str) -> String {
    cluster().psql(database, sql).unwrap().trim().to_owned()
}

fn versions(database: &str) -> String {
    scalar(
        database,
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM rojos_schema_versions",
    )
}

#[tokio::test]
async fn migrating_twice_migrates_once_and_keeps_the_data() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);

    let first = PostgresStore::migrate(&options).await.unwrap();
    let store = PostgresStore::open(&options).unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("kept")]).await.unwrap();
    let second = PostgresStore::migrate(&options).await.unwrap();

    assert_eq!(
        first,
        Migration {
            from: 0,
            to: POSTGRES_SCHEMA_VERSION
        }
    );
    assert_eq!(
        second,
        Migration {
            from: POSTGRES_SCHEMA_VERSION,
            to: POSTGRES_SCHEMA_VERSION
        }
    );
    assert_eq!(versions(&database), "1,2,3,4,5,6,7,8,9,10");
    let messages = store.get(&id).await.unwrap().unwrap().messages;
    assert_eq!(messages, vec![user("kept")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_migrating_at_once_all_succeed_and_one_of_them_migrates() {
    let database = cluster().create_database().unwrap();
    let options = Arc::new(pg_options(&database));

    let mut hosts = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let options = Arc::clone(&options);
        hosts.spawn(async move { PostgresStore::connect(&options).await });
    }
    let mut stores = Vec::new();
    while let Some(started) = hosts.join_next().await {
        stores.push(started.unwrap().unwrap());
    }

    assert_eq!(stores.len(), 4);
    assert_eq!(
        versions(&database),
        "1,2,3,4,5,6,7,8,9,10",
        "each version recorded once"
    );
    let id = stores[0].create("demo", "default").await.unwrap();
    stores[3]
        .append(&id, vec![user("seen by all")])
        .await
        .unwrap();
    assert_eq!(
        stores[1].get(&id).await.unwrap().unwrap().messages,
        vec![user("seen by all")]
    );
}

/// The foreign keys of `messages` and `run_leases`, as `table:column` pairs.
fn foreign_keys(database: &str) -> String {
    scalar(
        database,
        "SELECT coalesce(string_agg(conrelid::regclass || ':' || a.attname, ',' ORDER BY 1), '')
         FROM pg_constraint c JOIN pg_attribute a
           ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
         WHERE c.contype = 'f'",
    )
}

#[tokio::test]
async fn a_version_2_database_loses_its_foreign_keys_and_keeps_its_messages_and_leases() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    PostgresStore::migrate(&options).await.unwrap();
    let store = PostgresStore::open(&options).unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("before")]).await.unwrap();
    let holder = store
        .run_leases()
        .acquire(&id, std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    // Back to version 2 as it shipped: its two foreign keys, no version 3.
    cluster()
        .psql(
            &database,
            "ALTER TABLE messages ADD CONSTRAINT messages_conversation_id_fkey
                 FOREIGN KEY (conversation_id) REFERENCES conversations (id) ON DELETE CASCADE;
             ALTER TABLE run_leases ADD CONSTRAINT run_leases_conversation_id_fkey
                 FOREIGN KEY (conversation_id) REFERENCES conversations (id) ON DELETE CASCADE;
             ALTER TABLE conversations DROP COLUMN custom_title;
             DROP TABLE approvals; DROP TABLE approved_tools;
             ALTER TABLE messages DROP COLUMN search_text;
             DROP TABLE compactions; DROP TABLE run_feeds; DROP TABLE run_events;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DELETE FROM rojos_schema_versions WHERE version >= 3;",
        )
        .unwrap();
    assert_eq!(
        foreign_keys(&database),
        "messages:conversation_id,run_leases:conversation_id"
    );

    let migrated = PostgresStore::migrate(&options).await.unwrap();

    assert_eq!(migrated, Migration { from: 2, to: 10 });
    assert_eq!(foreign_keys(&database), "");
    assert_eq!(versions(&database), "1,2,3,4,5,6,7,8,9,10");
    store.append(&id, vec![user("after")]).await.unwrap();
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().messages,
        vec![user("before"), user("after")]
    );
    let leases = store.run_leases();
    let taken = leases
        .acquire(&id, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        taken.is_none(),
        "the lease taken before the migration still holds"
    );
    leases.release(&id, holder).await.unwrap();
}

#[tokio::test]
async fn a_version_3_database_gains_given_titles_and_keeps_its_derived_ones() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    PostgresStore::migrate(&options).await.unwrap();
    let store = PostgresStore::open(&options).unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("derived title")])
        .await
        .unwrap();
    // Back to version 3 as it shipped: no `custom_title`, no approvals, no search text, no
    // version 4, 5, 6, 7, 8 or 9.
    cluster()
        .psql(
            &database,
            "ALTER TABLE conversations DROP COLUMN custom_title;
             DROP TABLE approvals; DROP TABLE approved_tools;
             ALTER TABLE messages DROP COLUMN search_text;
             DROP TABLE compactions; DROP TABLE run_feeds; DROP TABLE run_events;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DELETE FROM rojos_schema_versions WHERE version >= 4;",
        )
        .unwrap();

    let migrated = PostgresStore::migrate(&options).await.unwrap();

    assert_eq!(migrated, Migration { from: 3, to: 10 });
    assert_eq!(versions(&database), "1,2,3,4,5,6,7,8,9,10");
    let store = PostgresStore::open(&options).unwrap();
    let title = |list: Vec<rojos_conversations::ConversationSummary>| list[0].title.clone();
    assert_eq!(
        title(store.list("demo", 1).await.unwrap()).as_deref(),
        Some("derived title")
    );
    store.rename(&id, Some("given")).await.unwrap();
    assert_eq!(
        title(store.list("demo", 1).await.unwrap()).as_deref(),
        Some("given")
    );
}

#[tokio::test]
async fn a_database_from_a_newer_build_is_refused_and_left_alone() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    PostgresStore::migrate(&options).await.unwrap();
    let newer = POSTGRES_SCHEMA_VERSION + 1;
    cluster()
        .psql(
            &database,
            &format!("INSERT INTO rojos_schema_versions (version) VALUES ({newer})"),
        )
        .unwrap();

    let err = PostgresStore::connect(&options).await.unwrap_err();

    assert!(
        matches!(err, StoreError::DatabaseSchemaTooNew { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "conversation database {} has schema version {newer}, newer than version {} that this build knows",
            options.database(),
            POSTGRES_SCHEMA_VERSION
        )
    );
    assert_eq!(versions(&database), format!("1,2,3,4,5,6,7,8,9,10,{newer}"));
}

#[tokio::test]
async fn a_wrong_password_is_refused_without_showing_either_password() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database).with_password("not-the-password");

    let err = PostgresStore::connect(&options).await.unwrap_err();

    let text = chain(&err);
    assert!(matches!(err, StoreError::Backend { .. }), "{text}");
    assert!(
        text.starts_with(&format!(
            "conversation store could not migrate {}",
            options.database()
        )),
        "{text}"
    );
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(
        !text.contains("not-the-password") && !text.contains(&cluster().password()),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let options = rojos_conversations::PostgresOptions::from_url(&format!(
        "postgres://rojos@127.0.0.1:{port}/nothing"
    ))
    .unwrap();

    let err = PostgresStore::connect(&options).await.unwrap_err();

    assert!(
        matches!(err, StoreError::Unavailable { .. }),
        "{}",
        chain(&err)
    );
    assert_eq!(
        err.to_string(),
        format!("conversation store could not migrate postgres://rojos@127.0.0.1:{port}/nothing: the database is unreachable")
    );
}

#[tokio::test]
async fn a_version_5_database_keys_its_approvals_by_approval_id_and_keeps_their_state() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    PostgresStore::migrate(&options).await.unwrap();
    let store = PostgresStore::open(&options).unwrap();
    let id = store.create("demo", "default").await.unwrap();
    // Back to version 5 as it shipped: approvals keyed by the model's call id, no search text.
    cluster()
        .psql(
            &database,
            &format!(
                "ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;
                 ALTER TABLE approvals DROP COLUMN approval_id;
                 ALTER TABLE approvals ADD PRIMARY KEY (conversation_id, call_id);
                 INSERT INTO approvals (conversation_id, call_id, tool, state, reason)
                     VALUES ('{id}', 'waiting', 'delete_path', 'pending', NULL),
                            ('{id}', 'denied', 'delete_path', 'deny', 'no');
                 ALTER TABLE messages DROP COLUMN search_text;
                 DROP TABLE compactions; DROP TABLE run_feeds; DROP TABLE run_events;
                 ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DELETE FROM rojos_schema_versions WHERE version >= 6;"
            ),
        )
        .unwrap();

    let migrated = PostgresStore::migrate(&options).await.unwrap();

    assert_eq!(migrated, Migration { from: 5, to: 10 });
    let approvals = store.approvals();
    assert_eq!(
        approvals.state(&id, "denied").await.unwrap(),
        Some(ApprovalState::Decided(Decision::Deny {
            reason: Some("no".into())
        })),
        "an earlier row keeps its call id as its approval id"
    );
    assert_eq!(
        approvals
            .decide(&id, "waiting", &Decision::Approve)
            .await
            .unwrap(),
        Decided::Recorded {
            approval_id: "waiting".into(),
            call_id: "waiting".into()
        }
    );
    approvals
        .ask(&id, "approval_new", "waiting", "delete_path")
        .await
        .unwrap();
    assert_eq!(
        approvals.state(&id, "approval_new").await.unwrap(),
        Some(ApprovalState::Pending),
        "a call id asked again is a row of its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_6_database_has_its_stored_messages_made_searchable() {
    let database = cluster().create_database().unwrap();
    let store = PostgresStore::connect(&pg_options(&database))
        .await
        .unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(
            &id,
            vec![
                user("hello"),
                serde_json::json!({"role": "assistant", "content": [
                    {"type": "text", "text": "Find the Kettle"}
                ]}),
                serde_json::json!({"role": "assistant", "content": "nul \u{0} inside"}),
            ],
        )
        .await
        .unwrap();
    // Back to version 6 as it shipped: no search text, no index.
    cluster()
        .psql(
            &database,
            "ALTER TABLE messages DROP COLUMN search_text;
             DROP TABLE compactions; DROP TABLE run_feeds; DROP TABLE run_events;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DELETE FROM rojos_schema_versions WHERE version >= 7;",
        )
        .unwrap();

    PostgresStore::migrate(&pg_options(&database))
        .await
        .unwrap();

    let found = store.search("demo", "the kettle", 10).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].conversation.id, id);
    assert_eq!(
        cluster()
            .psql(&database, "SELECT count(search_text) FROM messages")
            .unwrap()
            .trim(),
        "2",
        "a text PostgreSQL cannot hold (NUL) is left unindexed"
    );
}

#[tokio::test]
async fn a_version_9_database_knows_the_rojo_of_no_turn_it_held_and_of_every_later_one() {
    let database = cluster().create_database().unwrap();
    let options = pg_options(&database);
    let store = PostgresStore::connect(&options).await.unwrap();
    let old = store.create("demo", "careful").await.unwrap();
    store
        .append(&old, vec![user("one"), user("two"), user("three")])
        .await
        .unwrap();
    let empty = store.create("demo", "careful").await.unwrap();
    // Back to version 9 as it shipped: a follow-up ran under the rojo its request named.
    cluster()
        .psql(
            &database,
            "ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DELETE FROM rojos_schema_versions WHERE version >= 10;",
        )
        .unwrap();

    let migrated = PostgresStore::migrate(&options).await.unwrap();

    assert_eq!(migrated, Migration { from: 9, to: 10 });
    let kept_from = |head: Option<ConversationHead>| head.unwrap().rojo_kept_from;
    assert_eq!(
        kept_from(store.head(&old).await.unwrap()),
        3,
        "no message stored before is known to be its rojo's"
    );
    assert_eq!(kept_from(store.head(&empty).await.unwrap()), 0);
    let new = store.create("demo", "careful").await.unwrap();
    store.append(&new, vec![user("hello")]).await.unwrap();
    assert_eq!(kept_from(store.head(&new).await.unwrap()), 0);
    // Messages that replace older ones (an edit, a regenerate) are known; every read of
    // the head says so.
    store
        .replace_from(&old, 1, Step::new(&[user("two, edited")]).unwrap())
        .await
        .unwrap();
    assert_eq!(kept_from(store.head(&old).await.unwrap()), 1);
    let page = store.page(&old, 0, 1 << 20).await.unwrap().unwrap();
    assert_eq!(
        (page.head.rojo.as_str(), page.head.rojo_kept_from),
        ("careful", 1)
    );
    let resumed = store.resume(&old).await.unwrap().unwrap();
    assert_eq!(resumed.head.rojo_kept_from, 1);
    assert_eq!(resumed.messages.len(), 2);
    assert_eq!(
        store.get(&old).await.unwrap().unwrap().messages.len(),
        2,
        "the whole conversation reads with the column in place"
    );
}
