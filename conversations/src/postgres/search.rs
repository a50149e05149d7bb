//! How the PostgreSQL store runs a search so that it is bounded: at most a quarter of the
//! pool's connections search at once (the other calls always find connections), each search
//! runs in a transaction with `SET LOCAL statement_timeout` (the server stops it when its
//! time is up, whatever the client does), and a search whose caller goes away (its future
//! is dropped: the request was cancelled) is cancelled on the server (`pg_cancel_request`
//! through tokio-postgres' cancel token), its connection taken out of the pool so the
//! cancel can hit nothing else. All of it works through a transaction pooler.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio::sync::Semaphore;
use tokio_postgres::error::SqlState;
use tokio_postgres::{CancelToken, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::failure::{client, query_failed};
use super::queries;
use super::statements::StatementMode;
use crate::error::StoreError;

/// What a search needs besides its text: the pool, how statements are sent, its time
/// limit, the gate on concurrent searches and the TLS connector its cancel request uses.
#[derive(Clone)]
pub(crate) struct Searches {
    pub(crate) pool: Pool,
    pub(crate) mode: StatementMode,
    pub(crate) limit: Duration,
    pub(crate) gate: std::sync::Arc<Semaphore>,
    pub(crate) tls: MakeRustlsConnect,
}

/// How many searches may run at once on a pool of `pool_size` connections: a quarter of
/// them, at least one.
pub(crate) fn concurrent_searches(pool_size: usize) -> usize {
    (pool_size / 4).max(1)
}

impl Searches {
    /// The rows of `queries::search_summaries`, within the search's time limit (waiting for
    /// a turn and a connection included).
    ///
    /// # Errors
    ///
    /// [`StoreError::SearchTimedOut`] when the time is up (the server's `statement_timeout`
    /// or the wait); what the query and the connection fail with otherwise.
    pub(crate) async fn run(
        &self,
        action: &(dyn Fn() -> String + Sync),
        project_id: &str,
        pattern: &str,
        messages: bool,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        let timed_out = StoreError::SearchTimedOut { limit: self.limit };
        let work = async {
            let _turn = self
                .gate
                .acquire()
                .await
                .map_err(|closed| StoreError::backend(action(), closed))?;
            let client = client(&self.pool, action()).await?;
            let mut running = Running::new(client, self.tls.clone());
            let result = self
                .query(&mut running, project_id, pattern, messages, limit)
                .await;
            running.finished();
            match result {
                Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED) => {
                    Err(StoreError::SearchTimedOut { limit: self.limit })
                }
                Err(e) => Err(query_failed(action(), e)),
                Ok(rows) => Ok(rows),
            }
        };
        // The server stops the statement at `limit`; the client waits a little longer for
        // its answer, so the server's own error is what it normally sees.
        let wait = self.limit + Duration::from_secs(1);
        tokio::time::timeout(wait, work)
            .await
            .unwrap_or(Err(timed_out))
    }

    async fn query(
        &self,
        running: &mut Running,
        project_id: &str,
        pattern: &str,
        messages: bool,
        limit: usize,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let client = running.client();
        let tx = client.transaction().await?;
        let millis = u64::try_from(self.limit.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        // A number this process made, not input: the one statement here not bound.
        tx.batch_execute(&format!("SET LOCAL statement_timeout = {millis}"))
            .await?;
        let rows =
            queries::search_summaries(&tx, self.mode, project_id, pattern, messages, limit).await?;
        tx.commit().await?;
        Ok(rows)
    }
}

/// A search's connection while its statement may run: dropped before
/// [`Running::finished`] (its caller went away), it cancels the statement on the server and
/// takes the connection out of the pool.
struct Running {
    client: Option<Object>,
    cancel: Option<(CancelToken, MakeRustlsConnect)>,
}

impl Running {
    fn new(client: Object, tls: MakeRustlsConnect) -> Self {
        let token = client.cancel_token();
        Self {
            client: Some(client),
            cancel: Some((token, tls)),
        }
    }

    fn client(&mut self) -> &mut Object {
        self.client
            .as_mut()
            .expect("the client is only taken when dropped")
    }

    /// The statement ended: nothing to cancel any more.
    fn finished(&mut self) {
        self.cancel = None;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some((token, tls)) = self.cancel.take() else {
            return;
        };
        // Out of the pool: closed once the cancel is sent, never handed to another call.
        let client = self.client.take().map(Object::take);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            match token.cancel_query(tls).await {
                Ok(()) => tracing::info!("a search was cancelled: its request went away"),
                Err(e) => tracing::warn!(error = %e, "a search could not be cancelled"),
            }
            drop(client);
        });
    }
}
