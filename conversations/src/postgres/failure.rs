//! Which PostgreSQL failures mean "the database cannot be reached right now" (the server
//! is down, restarting or cut off: [`StoreError::Unavailable`], which the host answers with
//! `503`) and which are anything else ([`StoreError::Backend`]).

use std::error::Error;
use std::future::Future;
use std::io::ErrorKind;
use std::time::Duration;

use deadpool_postgres::{Object, Pool, PoolError};

use crate::error::StoreError;

/// SQLSTATEs of a server that is going away or not yet there: `57P01` admin_shutdown,
/// `57P02` crash_shutdown, `57P03` cannot_connect_now (starting up, shutting down).
const GOING_AWAY: [&str; 3] = ["57P01", "57P02", "57P03"];

/// A failed query (or connection) as a store error naming `action`.
pub(crate) fn query_failed(action: String, error: tokio_postgres::Error) -> StoreError {
    if is_unreachable(&error) {
        StoreError::unavailable(action, error)
    } else if is_pooled_statement(&error) {
        StoreError::backend(action, BehindPooler(error))
    } else {
        StoreError::backend(action, error)
    }
}

/// Whether `error` is a named prepared statement missing or already there on the server
/// connection: what a transaction pooler does to them.
fn is_pooled_statement(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    error.code().is_some_and(|code| {
        *code == SqlState::INVALID_SQL_STATEMENT_NAME || *code == SqlState::DUPLICATE_PSTATEMENT
    })
}

/// A prepared-statement failure, with what to do about it.
#[derive(Debug, thiserror::Error)]
#[error(
    "a prepared statement is missing or doubled on the server connection: if a transaction \
     pooler (PgBouncer in pool_mode = transaction) is between Rojos and the database, set \
     [store] prepared_statements = false (docs/deploy.md)"
)]
struct BehindPooler(#[source] tokio_postgres::Error);

/// A connection from `pool`, or the failure to get one as a store error naming `action`.
pub(crate) async fn client(pool: &Pool, action: String) -> Result<Object, StoreError> {
    pool.get().await.map_err(|e| pool_failed(action, e))
}

/// A failure to get a pooled connection as a store error naming `action`.
fn pool_failed(action: String, error: PoolError) -> StoreError {
    match error {
        PoolError::Backend(error) => query_failed(action, error),
        PoolError::Timeout(_) => StoreError::unavailable(action, error),
        other => StoreError::backend(action, other),
    }
}

/// Whether `error` says the server is down, restarting or unreachable.
fn is_unreachable(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        let code = code.code();
        return code.starts_with("08") || GOING_AWAY.contains(&code);
    }
    let mut source: Option<&(dyn Error + 'static)> = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return is_network(io.kind());
        }
        source = cause.source();
    }
    false
}

/// I/O failures of a connection that is refused, cut or silent. A TLS handshake that fails
/// on a certificate is `InvalidData`, so it stays a configuration error.
fn is_network(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::NotConnected
            | ErrorKind::BrokenPipe
            | ErrorKind::TimedOut
            | ErrorKind::UnexpectedEof
            | ErrorKind::AddrNotAvailable
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
    )
}

/// A server that gave no answer within the query time-out.
#[derive(Debug, thiserror::Error)]
#[error("the database gave no answer within {} s ([store] query_timeout_secs)", .0.as_secs_f64())]
pub(crate) struct NoAnswer(pub(crate) Duration);

/// `work` (getting a connection and running its statement), failed as
/// [`StoreError::Unavailable`] when it takes longer than `limit`. Dropping the work drops
/// its connection back to the pool; a statement already sent is still committed or rolled
/// back whole by the server.
pub(crate) async fn within<T>(
    limit: Duration,
    action: impl FnOnce() -> String,
    work: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Err(StoreError::unavailable(action(), NoAnswer(limit))))
}
