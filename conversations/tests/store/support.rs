//! Helpers shared by the store tests: each backend's fresh store ([`Backend::open`]) with a
//! [`Fixture`] that reaches the same data without the store, the macro that runs a test on
//! both backends, a raw SQLite connection for the SQLite-only tests, and message builders.
//!
//! PostgreSQL tests share one throwaway cluster per test binary (see
//! `rojos_conversations::test_cluster`), each test in a database of its own. A machine
//! without the server fails these tests with how to install it; they are never skipped.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rojos_conversations::test_cluster::PgCluster;
use rojos_conversations::{ConversationStore, PostgresOptions, PostgresStore, SqliteStore};
use serde_json::{json, Value};
use tempfile::TempDir;

/// Defines `on_sqlite::NAME` and `on_postgres::NAME` for each `async fn NAME(Backend)` given.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await
                }
            )*
        }
    };
}
pub(crate) use on_both_backends;

/// The store implementations the suite runs against.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Backend {
    /// `SqliteStore` on a file in a temp dir.
    Sqlite,
    /// `PostgresStore` on a fresh database of the shared test cluster.
    Postgres,
}

/// Where a test's store keeps its data; keep it alive as long as the store.
#[derive(Debug)]
pub(crate) enum Fixture {
    /// The temp dir holding `storage/rojos.db`.
    Sqlite(TempDir),
    /// The database's name in [`cluster`].
    Postgres(String),
}

impl Backend {
    /// A new empty store of this backend.
    pub(crate) async fn open(self) -> (Fixture, Arc<dyn ConversationStore>) {
        match self {
            Backend::Sqlite => {
                let (dir, store) = open_temp();
                (Fixture::Sqlite(dir), Arc::new(store))
            }
            Backend::Postgres => {
                let database = cluster().create_database().unwrap();
                let store = PostgresStore::connect(&pg_options(&database))
                    .await
                    .unwrap();
                (Fixture::Postgres(database), Arc::new(store))
            }
        }
    }
}

impl Fixture {
    /// Runs `sql` on the store's data, bypassing the store.
    pub(crate) fn execute(&self, sql: &str) {
        match self {
            Fixture::Sqlite(dir) => raw(&db_path(dir)).execute_batch(sql).unwrap(),
            Fixture::Postgres(database) => drop(cluster().psql(database, sql).unwrap()),
        }
    }

    /// The one integer `sql` selects, bypassing the store.
    pub(crate) fn query_i64(&self, sql: &str) -> i64 {
        match self {
            Fixture::Sqlite(dir) => raw(&db_path(dir))
                .query_row(sql, [], |row| row.get(0))
                .unwrap(),
            Fixture::Postgres(database) => cluster()
                .psql(database, sql)
                .unwrap()
                .trim()
                .parse()
                .unwrap(),
        }
    }

    /// Makes the database itself refuse, mid-transaction, any message row whose JSON
    /// contains `boom`, with the error `boom refused`.
    pub(crate) fn refuse_boom(&self) {
        self.execute(match self {
            Fixture::Sqlite(_) => {
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON messages
                 WHEN NEW.json LIKE '%boom%'
                 BEGIN SELECT RAISE(ABORT, 'boom refused'); END;"
            }
            Fixture::Postgres(_) => {
                "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     IF NEW.json LIKE '%boom%' THEN RAISE EXCEPTION 'boom refused'; END IF;
                     RETURN NEW;
                 END $$;
                 CREATE TRIGGER refuse_boom BEFORE INSERT ON messages
                 FOR EACH ROW EXECUTE FUNCTION refuse_boom();"
            }
        });
    }
}

/// The test binary's PostgreSQL cluster, started on first use and stopped when the binary
/// exits.
pub(crate) fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match PgCluster::start() {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start the test PostgreSQL server: {e}"),
    })
}

/// Options for `database` of [`cluster`], with the password.
pub(crate) fn pg_options(database: &str) -> PostgresOptions {
    let cluster = cluster();
    PostgresOptions::from_url(&cluster.url(database))
        .unwrap()
        .with_password(&cluster.password())
}

/// A store on `<tempdir>/storage/rojos.db`; keep the `TempDir` alive as long as
/// the store.
pub(crate) fn open_temp() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db_path(&dir)).unwrap();
    (dir, store)
}

/// Where `open_temp` puts the database.
pub(crate) fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("storage").join("rojos.db")
}

/// A plain connection to the database file, bypassing the store.
pub(crate) fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// A user message.
pub(crate) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// A final assistant message.
pub(crate) fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// The full error chain, `{:#}`-style, for pinning messages.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
