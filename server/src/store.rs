//! Opening the conversation store `[store]` chooses, with the run leases and approvals that go with it
//! (in this process for SQLite, one process per file; in the database for PostgreSQL,
//! shared by every host), and `rojos migrate`. PostgreSQL is
//! migrated before the store is used, over a connection of its own made on a short-lived
//! thread and runtime, so this works from synchronous start-up code and from inside a
//! runtime alike; the store's pool connects later, on the server's runtime.

use std::future::Future;
use std::sync::Arc;

use rojos_conversations::{
    Approvals, ConversationStore, LocalRunLeases, PostgresStore, RunLeases, SharedFeeds,
    SqliteOptions, SqliteStore, StoreError,
};

use rojos_config::StoreConfig;

/// A conversation store and the run leases of its conversations.
pub struct OpenedStore {
    /// The conversations.
    pub store: Arc<dyn ConversationStore>,
    /// Who may run in which conversation.
    pub leases: Arc<dyn RunLeases>,
    /// Tool calls waiting for the user's decision, in the same database.
    pub approvals: Arc<dyn Approvals>,
    /// The runs' events, for the other hosts sharing the database (none for SQLite).
    pub shared_feeds: Option<Arc<dyn SharedFeeds>>,
}

impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("leases", &self.leases)
            .finish_non_exhaustive()
    }
}

/// The configured store, migrated to this build's schema, and its run leases.
///
/// # Errors
///
/// [`StoreError`] naming the file or database: unreachable, refused login, a schema newer
/// than this build's.
pub fn open(config: &StoreConfig) -> Result<OpenedStore, StoreError> {
    match config {
        StoreConfig::Sqlite {
            path,
            search_timeout,
        } => {
            let mut options = SqliteOptions::default();
            options.search_timeout = *search_timeout;
            let store = SqliteStore::open_with(path, options)?;
            Ok(OpenedStore {
                approvals: Arc::new(store.approvals()),
                store: Arc::new(store),
                leases: Arc::new(LocalRunLeases::new()),
                shared_feeds: None,
            })
        }
        StoreConfig::Postgres(options) => {
            on_own_runtime(PostgresStore::migrate(options))?;
            let store = PostgresStore::open(options)?;
            Ok(OpenedStore {
                leases: Arc::new(store.run_leases()),
                approvals: Arc::new(store.approvals()),
                shared_feeds: Some(Arc::new(store.shared_feeds())),
                store: Arc::new(store),
            })
        }
    }
}

/// `rojos migrate`: brings the store's schema to this build's version; the line to print.
///
/// # Errors
///
/// As [`open`].
pub fn migrate(config: &StoreConfig) -> Result<String, StoreError> {
    match config {
        StoreConfig::Sqlite { path, .. } => {
            SqliteStore::open(path)?;
            Ok(format!(
                "conversation database {} is at schema version {}",
                path.display(),
                rojos_conversations::SCHEMA_VERSION
            ))
        }
        StoreConfig::Postgres(options) => {
            let migration = on_own_runtime(PostgresStore::migrate(options))?;
            let database = options.database();
            Ok(if migration.from == migration.to {
                format!(
                    "conversation database {database} is already at schema version {}",
                    migration.to
                )
            } else {
                format!(
                    "conversation database {database} migrated from schema version {} to {}",
                    migration.from, migration.to
                )
            })
        }
    }
}

/// Runs `work` to completion on a new thread with a runtime of its own.
fn on_own_runtime<T: Send>(
    work: impl Future<Output = Result<T, StoreError>> + Send,
) -> Result<T, StoreError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| StoreError::Backend {
                        action: "start a runtime to migrate".to_owned(),
                        source: Box::new(e),
                    })?;
                runtime.block_on(work)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
