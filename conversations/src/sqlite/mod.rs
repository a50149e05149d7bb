//! `SqliteStore`: the embedded `ConversationStore`, one SQLite file in WAL mode.
//! Opening configures and migrates the file; each call then runs its blocking
//! SQL on a pooled connection (`pool`), with the SQL itself in `queries`.

mod approvals;
mod compaction;
mod pool;
mod queries;
mod schema;
mod search;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::Connection;

pub use approvals::SqliteApprovals;
pub use schema::SCHEMA_VERSION;

use crate::compaction::Compaction;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::search::SearchPattern;
use crate::step::Step;
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationStore, ConversationSummary,
    Resumed, SearchHit,
};
use crate::title::check_custom_title;
use pool::Pool;
use schema::Migrated;

/// How many fresh ids `create` tries before giving up; a clash of 131-bit
/// random ids is not expected even once.
const CREATE_ATTEMPTS: usize = 3;

/// Tuning for [`SqliteStore::open_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// Reader connections, so reads run beside the one writer (WAL allows it).
    /// At least 1 is used. Default: 4.
    pub readers: usize,
    /// How long a connection waits for a lock held by another process (or a WAL
    /// checkpoint) before failing. Default: 5 seconds.
    pub busy_timeout: Duration,
    /// Reader connections only searches use, so searches never keep the other reads
    /// waiting; searches beyond them wait for one. At least 1 is used. Default: 2.
    pub search_readers: usize,
    /// How long a search may take, waiting for a search reader included, before it is
    /// stopped with [`StoreError::SearchTimedOut`]. Default: 10 seconds.
    pub search_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            readers: 4,
            busy_timeout: Duration::from_secs(5),
            search_readers: 2,
            search_timeout: Duration::from_secs(10),
        }
    }
}

/// The embedded conversation store: one SQLite database file (e.g.
/// `<storage>/rojos.db`) in WAL mode, with `synchronous=NORMAL`, foreign keys on
/// and a busy timeout.
///
/// Writes go to one writer connection on a thread of its own, which commits the
/// writes waiting together in one transaction (each in its own savepoint) and
/// answers each after the commit; reads use a few reader connections that WAL lets
/// run beside it, waited for asynchronously and run on tokio's blocking pool. So the
/// store can be shared (e.g. in an `Arc`) by hundreds of concurrent chats. The files
/// close when the last clone of the store is dropped and running calls have finished.
#[derive(Clone)]
pub struct SqliteStore {
    path: Arc<PathBuf>,
    pool: Arc<Pool>,
    search_timeout: Duration,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating it and its folder if needed) the database at `path` with
    /// default [`SqliteOptions`], and migrates it to [`SCHEMA_VERSION`].
    ///
    /// This blocks on file I/O: call it at startup, or inside `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`StoreError::SchemaTooNew`] if a newer Rojos wrote the file;
    /// [`StoreError::Backend`] if it cannot be created, opened or migrated.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`SqliteStore::open`] with explicit options.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let action = || format!("open conversation database '{}'", path.display());
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| StoreError::backend(action(), e))?;
        }
        let mut writer = open_writer(&path, &options, action)?;
        match schema::migrate(&mut writer).map_err(|e| StoreError::backend(action(), e))? {
            Migrated::UpTo { .. } => {}
            Migrated::TooNew { found } => {
                return Err(StoreError::SchemaTooNew {
                    path,
                    found,
                    supported: SCHEMA_VERSION,
                })
            }
        }
        let readers = (0..options.readers.max(1))
            .map(|_| open_reader(&path, &options))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| StoreError::backend(action(), e))?;
        let search_readers = (0..options.search_readers.max(1))
            .map(|_| open_reader(&path, &options))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| StoreError::backend(action(), e))?;
        let pool = Pool::new(writer, readers, search_readers)
            .map_err(|e| StoreError::backend(action(), e))?;
        Ok(Self {
            path: Arc::new(path),
            pool,
            search_timeout: options.search_timeout,
        })
    }

    /// The approvals kept in this store's file, over the same connections
    /// (`crate::approvals`).
    pub fn approvals(&self) -> SqliteApprovals {
        SqliteApprovals::new(Arc::clone(&self.pool))
    }

    /// The database file this store uses.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The writer connection, with the file switched to WAL.
fn open_writer(
    path: &Path,
    options: &SqliteOptions,
    action: impl Fn() -> String,
) -> Result<Connection, StoreError> {
    let failed = |e| StoreError::backend(action(), e);
    let conn = Connection::open(path).map_err(failed)?;
    schema::configure(&conn, options.busy_timeout).map_err(failed)?;
    let mode = schema::enable_wal(&conn).map_err(failed)?;
    if !mode.eq_ignore_ascii_case("wal") {
        // SQLite keeps the old mode instead of failing, e.g. on a filesystem
        // without shared memory; refuse rather than run without WAL.
        return Err(StoreError::backend(
            action(),
            format!("journal_mode stayed '{mode}' where WAL is required"),
        ));
    }
    Ok(conn)
}

/// A reader connection, refusing writes.
fn open_reader(path: &Path, options: &SqliteOptions) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    schema::configure(&conn, options.busy_timeout)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn create_with(
        &self,
        project_id: &str,
        rojo: &str,
        first: Step,
    ) -> Result<ConversationId, StoreError> {
        let action = format!("create a conversation in project '{project_id}'");
        let (project_id, rojo) = (project_id.to_owned(), rojo.to_owned());
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                for _ in 0..CREATE_ATTEMPTS {
                    let id = ConversationId::generate();
                    let now = queries::now_millis();
                    let inserted =
                        queries::insert_conversation(conn, &id, &project_id, &rojo, &first, now)
                            .map_err(|e| StoreError::backend(failed.clone(), e))?;
                    if inserted {
                        return Ok(id);
                    }
                }
                Err(StoreError::backend(
                    failed,
                    "every generated id was already taken",
                ))
            })
            .await
    }

    async fn get(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        let id = id.clone();
        let action = format!("read conversation '{id}'");
        self.pool
            .read(&action, move |conn| queries::select_conversation(conn, &id))
            .await
    }

    async fn resume(&self, id: &ConversationId) -> Result<Option<Resumed>, StoreError> {
        let id = id.clone();
        let action = format!("read conversation '{id}'");
        self.pool
            .read(&action, move |conn| queries::select_resumed(conn, &id))
            .await
    }

    async fn head(&self, id: &ConversationId) -> Result<Option<ConversationHead>, StoreError> {
        let id = id.clone();
        let action = format!("read conversation '{id}'");
        self.pool
            .read(&action, move |conn| queries::select_head(conn, &id))
            .await
    }

    async fn page(
        &self,
        id: &ConversationId,
        from: u64,
        max_bytes: usize,
    ) -> Result<Option<ConversationPage>, StoreError> {
        let id = id.clone();
        let action = format!("read a page of conversation '{id}'");
        self.pool
            .read(&action, move |conn| {
                queries::select_page(conn, &id, from, max_bytes)
            })
            .await
    }

    async fn append_step(&self, id: &ConversationId, step: Step) -> Result<(), StoreError> {
        let id = id.clone();
        let action = format!("append to conversation '{id}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                let now = queries::now_millis();
                match queries::insert_step(conn, &id, &step, now) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(StoreError::NotFound { id }),
                    Err(e) => Err(StoreError::backend(failed, e)),
                }
            })
            .await
    }

    async fn list(
        &self,
        project_id: &str,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let project_id = project_id.to_owned();
        let action = format!("list the conversations of project '{project_id}'");
        self.pool
            .read(&action, move |conn| {
                queries::select_summaries(conn, &project_id, limit)
            })
            .await
    }

    async fn replace_from(
        &self,
        id: &ConversationId,
        from: u64,
        step: Step,
    ) -> Result<(), StoreError> {
        let id = id.clone();
        let action = format!("replace messages of conversation '{id}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                let now = queries::now_millis();
                match queries::replace_step(conn, &id, from, &step, now) {
                    Ok(queries::Replaced::Done) => Ok(()),
                    Ok(queries::Replaced::NotFound) => Err(StoreError::NotFound { id }),
                    Ok(queries::Replaced::PastEnd { count }) => {
                        Err(StoreError::ReplacePastEnd { id, from, count })
                    }
                    Err(e) => Err(StoreError::backend(failed, e)),
                }
            })
            .await
    }

    async fn rename(&self, id: &ConversationId, title: Option<&str>) -> Result<(), StoreError> {
        let title = title.map(check_custom_title).transpose()?;
        let id = id.clone();
        let action = format!("rename conversation '{id}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                match queries::update_custom_title(conn, &id, title.as_deref()) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(StoreError::NotFound { id }),
                    Err(e) => Err(StoreError::backend(failed, e)),
                }
            })
            .await
    }

    async fn delete(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let id = id.clone();
        let action = format!("delete conversation '{id}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                queries::delete_conversation(conn, &id).map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn compactions(&self, id: &ConversationId) -> Result<Vec<Compaction>, StoreError> {
        let id = id.clone();
        let action = format!("read the compactions of conversation '{id}'");
        let failed = action.clone();
        self.pool
            .read(&action, move |conn| {
                compaction::select(conn, &id).map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn save_compaction(
        &self,
        id: &ConversationId,
        compaction: &Compaction,
    ) -> Result<(), StoreError> {
        let (id, compaction) = (id.clone(), compaction.clone());
        let action = format!("save a compaction of conversation '{id}'");
        let failed = action.clone();
        self.pool
            .write(&action, move |conn| {
                compaction::insert(conn, &id, &compaction, queries::now_millis())
                    .map_err(|e| StoreError::backend(failed, e))
            })
            .await
    }

    async fn search(
        &self,
        project_id: &str,
        text: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let pattern = SearchPattern::new(text);
        let project_id = project_id.to_owned();
        let action = format!("search the conversations of project '{project_id}'");
        self.pool
            .search(&action, self.search_timeout, move |conn| {
                search::search(conn, &project_id, &pattern, limit)
            })
            .await
    }
}
