//! `PostgresStore`: the `ConversationStore` in a PostgreSQL database, which several hosts
//! can share. Calls borrow a connection from an async pool (`connect`: deadpool-postgres
//! over tokio-postgres, TLS in `tls`) and run one statement each (`queries`); the schema is
//! versioned and migrated under an advisory lock (`schema`); `failure` tells an unreachable
//! database from other errors; `lease` keeps the hosts' run leases in the same database, `shared_feed` their runs'
//! events;
//! `statements` sends each statement prepared or unnamed (behind a transaction pooler);
//! `search` bounds searches (a share of the pool, a server-side time limit, a cancel when
//! the caller goes away).

mod approvals;
mod compaction;
mod connect;
mod failure;
mod lease;
mod queries;
mod schema;
mod search;
mod shared_feed;
mod statements;
mod tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use tokio::sync::Semaphore;

pub use approvals::PostgresApprovals;
pub use connect::{PostgresOptions, UrlError};
pub use lease::PostgresRunLeases;
pub use schema::{Migration, POSTGRES_SCHEMA_VERSION};
pub use shared_feed::PostgresSharedFeeds;
pub use statements::StatementMode;
pub use tls::PostgresTls;

use crate::compaction::Compaction;
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::search::SearchPattern;
use crate::snippet::Snippet;
use crate::step::Step;
use crate::store::{
    Conversation, ConversationHead, ConversationPage, ConversationStore, ConversationSummary,
    Resumed, SearchHit,
};
use crate::title::{check_custom_title, contains_pattern};
use failure::{query_failed, within};
use schema::Migrated;
use search::{concurrent_searches, Searches};

/// How many fresh ids `create` tries before giving up; a clash of 131-bit
/// random ids is not expected even once.
const CREATE_ATTEMPTS: usize = 3;

/// The conversation store in PostgreSQL: the same behaviour as [`SqliteStore`](crate::SqliteStore),
/// with the data on a database server, so any number of hosts can serve the same
/// conversations.
///
/// Connections are opened when first needed, up to the pool size, and shared by all calls;
/// one the server closed is replaced on its next use, so the store recovers by itself when
/// the database comes back. While it cannot be reached, or gives no answer within
/// [`PostgresOptions::query_timeout`], calls fail with [`StoreError::Unavailable`]. Cheap to
/// clone.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    database: Arc<str>,
    query_timeout: Duration,
    mode: StatementMode,
    searches: Searches,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Migrates the database to [`POSTGRES_SCHEMA_VERSION`], then opens the store.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::migrate`] and [`PostgresStore::open`].
    pub async fn connect(options: &PostgresOptions) -> Result<Self, StoreError> {
        Self::migrate(options).await?;
        Self::open(options)
    }

    /// The store, without connecting yet (the first call does) and without migrating: use
    /// it after [`PostgresStore::migrate`]. Needs no async runtime to be called, only to be
    /// used.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the TLS configuration cannot be made (an unreadable CA
    /// file).
    pub fn open(options: &PostgresOptions) -> Result<Self, StoreError> {
        let pool = connect::pool(options)?;
        let tls = tls::connector(&options.tls)
            .map_err(|e| StoreError::backend(format!("connect to {}", options.database()), e))?;
        Ok(Self {
            searches: Searches {
                pool: pool.clone(),
                mode: options.statements,
                limit: options.search_timeout,
                gate: Arc::new(Semaphore::new(concurrent_searches(options.pool_size))),
                tls,
            },
            pool,
            database: options.database().into(),
            query_timeout: options.query_timeout,
            mode: options.statements,
        })
    }

    /// Brings the database's schema to [`POSTGRES_SCHEMA_VERSION`] over a connection of its
    /// own, safely when several hosts do it at once (one migrates, the others wait, then
    /// find it done).
    ///
    /// # Errors
    ///
    /// [`StoreError::DatabaseSchemaTooNew`] if a newer Rojos migrated it;
    /// [`StoreError::Unavailable`] if the server cannot be reached; [`StoreError::Backend`]
    /// for any other failure (a refused login, a TLS certificate that does not verify).
    pub async fn migrate(options: &PostgresOptions) -> Result<Migration, StoreError> {
        let database = options.database();
        let action = || format!("migrate {database}");
        let pool = connect::pool(options)?;
        let mut client = failure::client(&pool, action()).await?;
        let migrated = schema::migrate(&mut client)
            .await
            .map_err(|e| query_failed(action(), e))?;
        match migrated {
            Migrated::Done(migration) => Ok(migration),
            Migrated::TooNew { found } => Err(StoreError::DatabaseSchemaTooNew {
                database,
                found,
                supported: POSTGRES_SCHEMA_VERSION,
            }),
        }
    }

    /// The run leases kept in this store's database, over the same connection pool: what
    /// every host sharing the database uses so one run at a time writes to a conversation.
    pub fn run_leases(&self) -> PostgresRunLeases {
        PostgresRunLeases::new(self.pool.clone(), self.query_timeout, self.mode)
    }

    /// The approvals kept in this store's database, over the same connection pool
    /// (`crate::approvals`): every host sharing the database sees every decision.
    pub fn approvals(&self) -> PostgresApprovals {
        PostgresApprovals::new(self.pool.clone(), self.query_timeout, self.mode)
    }

    /// The run feeds kept in this store's database, over the same connection pool
    /// (`crate::shared_feed`): any host sharing the database follows and stops any run.
    pub fn shared_feeds(&self) -> PostgresSharedFeeds {
        PostgresSharedFeeds::new(self.pool.clone(), self.query_timeout, self.mode)
    }

    /// The database, as messages name it: `postgres://user@host:port/database`.
    pub fn database(&self) -> &str {
        &self.database
    }

    async fn client(&self, action: String) -> Result<Object, StoreError> {
        failure::client(&self.pool, action).await
    }
}

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn create_with(
        &self,
        project_id: &str,
        rojo: &str,
        first: Step,
    ) -> Result<ConversationId, StoreError> {
        let action = || format!("create a conversation in project '{project_id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            for _ in 0..CREATE_ATTEMPTS {
                let id = ConversationId::generate();
                let inserted =
                    queries::insert_conversation(&client, self.mode, &id, project_id, rojo, &first)
                        .await
                        .map_err(|e| query_failed(action(), e))?;
                if inserted {
                    return Ok(id);
                }
            }
            Err(StoreError::backend(
                action(),
                "every generated id was already taken",
            ))
        })
        .await
    }

    async fn get(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        let action = || format!("read conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            let row = queries::select_conversation(&client, self.mode, id)
                .await
                .map_err(|e| query_failed(action(), e))?;
            row.map(|row| queries::conversation(&row, id)).transpose()
        })
        .await
    }

    async fn resume(&self, id: &ConversationId) -> Result<Option<Resumed>, StoreError> {
        let action = || format!("read conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            let row = queries::select_resumed(&client, self.mode, id)
                .await
                .map_err(|e| query_failed(action(), e))?;
            row.map(|row| queries::resumed(&row, id)).transpose()
        })
        .await
    }

    async fn head(&self, id: &ConversationId) -> Result<Option<ConversationHead>, StoreError> {
        let action = || format!("read conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            queries::select_head(&client, self.mode, id)
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await
    }

    async fn page(
        &self,
        id: &ConversationId,
        from: u64,
        max_bytes: usize,
    ) -> Result<Option<ConversationPage>, StoreError> {
        let action = || format!("read a page of conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            let row = queries::select_page(&client, self.mode, id, from, max_bytes)
                .await
                .map_err(|e| query_failed(action(), e))?;
            row.map(|row| queries::page(&row, id, from)).transpose()
        })
        .await
    }

    async fn append_step(&self, id: &ConversationId, step: Step) -> Result<(), StoreError> {
        let action = || format!("append to conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            // One statement: once sent, the server stores or refuses the step whole even if
            // this task is cancelled (or times out) while waiting for the answer.
            match queries::insert_step(&client, self.mode, id, &step).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(StoreError::NotFound { id: id.clone() }),
                Err(e) => Err(query_failed(action(), e)),
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
        let action = || format!("list the conversations of project '{project_id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            let rows = queries::select_summaries(&client, self.mode, project_id, limit)
                .await
                .map_err(|e| query_failed(action(), e))?;
            rows.iter()
                .map(|row| queries::summary(row, project_id))
                .collect()
        })
        .await
    }

    async fn replace_from(
        &self,
        id: &ConversationId,
        from: u64,
        step: Step,
    ) -> Result<(), StoreError> {
        let action = || format!("replace messages of conversation '{id}'");
        within(self.query_timeout, action, async {
            let mut client = self.client(action()).await?;
            match queries::replace_step(&mut client, self.mode, id, from, &step).await {
                Ok(queries::Replaced::Done) => Ok(()),
                Ok(queries::Replaced::NotFound) => Err(StoreError::NotFound { id: id.clone() }),
                Ok(queries::Replaced::PastEnd { count }) => Err(StoreError::ReplacePastEnd {
                    id: id.clone(),
                    from,
                    count,
                }),
                Err(e) => Err(query_failed(action(), e)),
            }
        })
        .await
    }

    async fn rename(&self, id: &ConversationId, title: Option<&str>) -> Result<(), StoreError> {
        let title = title.map(check_custom_title).transpose()?;
        let action = || format!("rename conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            match queries::update_custom_title(&client, self.mode, id, title.as_deref()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(StoreError::NotFound { id: id.clone() }),
                Err(e) => Err(query_failed(action(), e)),
            }
        })
        .await
    }

    async fn delete(&self, id: &ConversationId) -> Result<bool, StoreError> {
        let action = || format!("delete conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            queries::delete_conversation(&client, self.mode, id)
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await
    }

    async fn compactions(&self, id: &ConversationId) -> Result<Vec<Compaction>, StoreError> {
        let action = || format!("read the compactions of conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            compaction::select(&client, self.mode, id)
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await
    }

    async fn save_compaction(
        &self,
        id: &ConversationId,
        compaction: &Compaction,
    ) -> Result<(), StoreError> {
        let action = || format!("save a compaction of conversation '{id}'");
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            compaction::insert(&client, self.mode, id, compaction)
                .await
                .map_err(|e| query_failed(action(), e))
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
        let searched = SearchPattern::new(text);
        let messages = searched.searches_messages();
        let pattern = contains_pattern(text);
        let action = || format!("search the conversations of project '{project_id}'");
        let rows = self
            .searches
            .run(&action, project_id, &pattern, messages, limit)
            .await?;
        rows.iter()
            .map(|row| {
                let hit: Option<(i64, String)> = row.get::<_, Option<i64>>(6).zip(row.get(7));
                let snippet = hit.and_then(|(seq, text)| {
                    Snippet::of(u64::try_from(seq).ok()?, &text, searched.folded())
                });
                Ok(SearchHit {
                    conversation: queries::summary(row, project_id)?,
                    snippet,
                })
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let action = || "reach the database".to_owned();
        within(self.query_timeout, action, async {
            let client = self.client(action()).await?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| query_failed(action(), e))?;
            Ok(())
        })
        .await
    }
}
