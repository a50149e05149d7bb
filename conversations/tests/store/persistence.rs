//! The database file: WAL mode, survival across restarts, schema versioning and
//! migration, and refusal of files this build must not touch.

use rojos_conversations::{
    ApprovalState, Approvals, ConversationHead, ConversationStore, Decided, Decision,
    SqliteOptions, SqliteStore, Step, StoreError, SCHEMA_VERSION,
};

use crate::support::{assistant, chain, db_path, open_temp, raw, user};

fn user_version(path: &std::path::Path) -> i64 {
    raw(path)
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap()
}

#[tokio::test]
async fn conversations_survive_closing_and_reopening_the_store() {
    let (dir, store) = open_temp();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("remember me")]).await.unwrap();
    store.append(&id, vec![assistant("I will")]).await.unwrap();
    let before = store.get(&id).await.unwrap().unwrap();
    drop(store);

    let reopened = SqliteStore::open(db_path(&dir)).unwrap();

    assert_eq!(reopened.get(&id).await.unwrap().unwrap(), before);
    reopened
        .append(&id, vec![user("still here?")])
        .await
        .unwrap();
    assert_eq!(reopened.get(&id).await.unwrap().unwrap().messages.len(), 3);
    assert_eq!(reopened.list("demo", 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_database_file_is_in_wal_mode() {
    let (dir, store) = open_temp();
    store.create("demo", "default").await.unwrap();

    let mode: String = raw(&db_path(&dir))
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();

    assert_eq!(mode, "wal");
    assert!(dir.path().join("storage/rojos.db-wal").exists());
}

#[test]
fn an_empty_file_is_migrated_to_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.db");
    std::fs::File::create(&path).unwrap();
    assert_eq!(user_version(&path), 0);

    SqliteStore::open(&path).unwrap();

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let tables: Vec<String> = raw(&path)
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
             AND name NOT LIKE 'search\\_trigrams\\_%' ESCAPE '\\' ORDER BY name",
        )
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        tables,
        [
            "approvals",
            "approved_tools",
            "compactions",
            "conversations",
            "messages",
            "search_docs",
            "search_projects",
            "search_trigrams"
        ]
    );
}

#[tokio::test]
async fn a_version_5_file_has_its_stored_messages_indexed_for_search() {
    let (dir, store) = open_temp();
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("hello"), assistant("Find the Kettle")])
        .await
        .unwrap();
    drop(store);
    // Back to version 5 as it shipped: no search index.
    raw(&db_path(&dir))
        .execute_batch(
            "DROP TABLE compactions;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DROP TABLE search_trigrams; DROP TABLE search_docs; DROP TABLE search_projects;
             PRAGMA user_version = 5;",
        )
        .unwrap();

    let store = SqliteStore::open(db_path(&dir)).unwrap();

    assert_eq!(user_version(&db_path(&dir)), SCHEMA_VERSION);
    let found = store.search("demo", "the kettle", 10).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].conversation.id, id);
}

#[tokio::test]
async fn an_already_migrated_file_opens_unchanged() {
    let (dir, store) = open_temp();
    let id = store.create("demo", "default").await.unwrap();
    drop(store);
    let path = db_path(&dir);
    let schema_before: Vec<String> = raw(&path)
        .prepare("SELECT sql FROM sqlite_schema ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get::<_, Option<String>>(0))
        .unwrap()
        .map(|sql| sql.unwrap().unwrap_or_default())
        .collect();

    let store = SqliteStore::open(&path).unwrap();

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let schema_after: Vec<String> = raw(&path)
        .prepare("SELECT sql FROM sqlite_schema ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get::<_, Option<String>>(0))
        .unwrap()
        .map(|sql| sql.unwrap().unwrap_or_default())
        .collect();
    assert_eq!(schema_after, schema_before);
    assert!(store.get(&id).await.unwrap().is_some());
}

#[test]
fn a_file_from_a_newer_schema_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.db");
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();

    let err = SqliteStore::open(&path).unwrap_err();

    assert!(matches!(err, StoreError::SchemaTooNew { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "conversation database '{}' has schema version {}, newer than version {} that this build knows",
            path.display(),
            SCHEMA_VERSION + 1,
            SCHEMA_VERSION
        )
    );
    assert_eq!(user_version(&path), SCHEMA_VERSION + 1);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.db");
    std::fs::write(
        &path,
        "this is not a database, just some text padding it out",
    )
    .unwrap();

    let err = SqliteStore::open(&path).unwrap_err();

    assert!(matches!(err, StoreError::Backend { .. }));
    let text = chain(&err);
    let expected = format!(
        "conversation store could not open conversation database '{}'",
        path.display()
    );
    assert!(text.starts_with(&expected), "{text}");
}

#[tokio::test]
async fn two_stores_on_one_file_see_each_others_writes() {
    let (dir, first) = open_temp();
    let mut options = SqliteOptions::default();
    options.readers = 1;
    let second = SqliteStore::open_with(db_path(&dir), options).unwrap();
    let id = first.create("demo", "default").await.unwrap();

    second
        .append(&id, vec![user("from the second")])
        .await
        .unwrap();

    let messages = first.get(&id).await.unwrap().unwrap().messages;
    assert_eq!(messages, vec![user("from the second")]);
}

#[tokio::test]
async fn a_version_2_file_gains_given_titles_and_keeps_its_derived_ones() {
    let (dir, store) = open_temp();
    let id = store.create("demo", "default").await.unwrap();
    store
        .append(&id, vec![user("derived title")])
        .await
        .unwrap();
    drop(store);
    let path = db_path(&dir);
    // Back to version 2 as it shipped: no `custom_title`, no approvals (version 4), no
    // search index (version 5).
    raw(&path)
        .execute_batch(
            "ALTER TABLE conversations DROP COLUMN custom_title;
             DROP TABLE approvals; DROP TABLE approved_tools; DROP TABLE compactions;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DROP TABLE search_trigrams; DROP TABLE search_docs; DROP TABLE search_projects;
             PRAGMA user_version = 2;",
        )
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 8);
    let approvals: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name IN ('approvals', 'approved_tools')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(approvals, 2, "version 4 added the approvals");
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
async fn a_version_4_file_keys_its_approvals_by_approval_id_and_keeps_their_state() {
    let (dir, store) = open_temp();
    let id = store.create("demo", "default").await.unwrap();
    drop(store);
    let path = db_path(&dir);
    // Back to version 4 as it shipped: approvals keyed by the model's call id, no search index.
    raw(&path)
        .execute_batch(&format!(
            "DROP TABLE compactions;
             ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             DROP TABLE search_trigrams; DROP TABLE search_docs; DROP TABLE search_projects;
             DROP TABLE approvals;
             CREATE TABLE approvals (
                 conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
                 call_id         TEXT NOT NULL,
                 tool            TEXT NOT NULL,
                 state           TEXT NOT NULL,
                 reason          TEXT,
                 PRIMARY KEY (conversation_id, call_id)
             ) STRICT;
             INSERT INTO approvals VALUES ('{id}', 'waiting', 'delete_path', 'pending', NULL),
                                          ('{id}', 'denied', 'delete_path', 'deny', 'no');
             PRAGMA user_version = 4;"
        ))
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();

    assert_eq!(user_version(&path), SCHEMA_VERSION);
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

#[tokio::test]
async fn a_version_7_file_knows_the_rojo_of_no_turn_it_held_and_of_every_later_one() {
    let (dir, store) = open_temp();
    let old = store.create("demo", "careful").await.unwrap();
    for message in [
        user("one"),
        assistant("answer one"),
        user("two"),
        assistant("answer two"),
    ] {
        store.append(&old, vec![message]).await.unwrap();
    }
    let empty = store.create("demo", "careful").await.unwrap();
    drop(store);
    let path = db_path(&dir);
    // Back to version 7 as it shipped: a follow-up ran under the rojo its request named.
    raw(&path)
        .execute_batch(
            "ALTER TABLE conversations DROP COLUMN rojo_kept_from;
             PRAGMA user_version = 7;",
        )
        .unwrap();

    let store = SqliteStore::open(&path).unwrap();

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let kept_from = |head: Option<ConversationHead>| head.unwrap().rojo_kept_from;
    assert_eq!(
        kept_from(store.head(&old).await.unwrap()),
        4,
        "no message stored before is known to be its rojo's"
    );
    assert_eq!(kept_from(store.head(&empty).await.unwrap()), 0);
    // A later turn is known, and so is every turn of a new conversation.
    store.append(&old, vec![user("three")]).await.unwrap();
    assert_eq!(kept_from(store.head(&old).await.unwrap()), 4);
    let new = store.create("demo", "careful").await.unwrap();
    store.append(&new, vec![user("hello")]).await.unwrap();
    assert_eq!(kept_from(store.head(&new).await.unwrap()), 0);
    // Messages that replace older ones (an edit, a regenerate) are known.
    store
        .replace_from(&old, 2, Step::new(&[user("two, edited")]).unwrap())
        .await
        .unwrap();
    assert_eq!(kept_from(store.head(&old).await.unwrap()), 2);
    let page = store.page(&old, 0, 1 << 20).await.unwrap().unwrap();
    assert_eq!(page.head.rojo_kept_from, 2);
    assert_eq!(page.head.rojo, "careful");
}
