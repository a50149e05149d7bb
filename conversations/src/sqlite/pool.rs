//! The SQLite connections and how async callers borrow them: one writer and a
//! few readers, each used on a `spawn_blocking` thread. Tasks wait for a
//! connection on a tokio `Semaphore` (asynchronously), so at most one blocking
//! thread per connection exists and no `std` lock is ever held across `.await`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use crate::error::StoreError;

/// One writer connection and `readers.len()` reader connections.
#[derive(Debug)]
pub(crate) struct Pool {
    writer: Mutex<Connection>,
    /// One permit: write transactions run one at a time, as SQLite allows.
    write_gate: Arc<Semaphore>,
    readers: Vec<Mutex<Connection>>,
    /// One permit per reader, so a permit holder always finds a free reader.
    read_gate: Arc<Semaphore>,
}

impl Pool {
    /// Wraps opened connections. `readers` must not be empty.
    pub(crate) fn new(writer: Connection, readers: Vec<Connection>) -> Arc<Self> {
        let reader_count = readers.len();
        Arc::new(Self {
            writer: Mutex::new(writer),
            write_gate: Arc::new(Semaphore::new(1)),
            readers: readers.into_iter().map(Mutex::new).collect(),
            read_gate: Arc::new(Semaphore::new(reader_count)),
        })
    }

    /// Runs `work` on the writer connection, off the async runtime.
    ///
    /// `action` names the work in the error if the worker cannot run or panics.
    pub(crate) async fn write<T, F>(
        self: &Arc<Self>,
        action: &str,
        work: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let permit = Arc::clone(&self.write_gate)
            .acquire_owned()
            .await
            .map_err(|closed| StoreError::backend(action, closed))?;
        let pool = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut conn = relock(pool.writer.lock());
            work(&mut conn)
        });
        job.await
            .map_err(|failed| StoreError::backend(action, failed))?
    }

    /// Runs `work` on a free reader connection, off the async runtime.
    ///
    /// `action` names the work in the error if the worker cannot run or panics.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, action: &str, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let permit = Arc::clone(&self.read_gate)
            .acquire_owned()
            .await
            .map_err(|closed| StoreError::backend(action, closed))?;
        let pool = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut conn = pool.free_reader();
            work(&mut conn)
        });
        job.await
            .map_err(|failed| StoreError::backend(action, failed))?
    }

    /// A reader nobody holds. The caller's read permit guarantees one exists; the
    /// blocking fallback only covers a guard still being dropped by a finished job.
    fn free_reader(&self) -> MutexGuard<'_, Connection> {
        for reader in &self.readers {
            match reader.try_lock() {
                Ok(conn) => return conn,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        relock(self.readers[0].lock())
    }
}

/// Takes a lock even if a job panicked while holding it: the panic dropped any
/// open `rusqlite::Transaction`, which rolls back, so the connection is sound.
fn relock<'a>(
    locked: Result<MutexGuard<'a, Connection>, PoisonError<MutexGuard<'a, Connection>>>,
) -> MutexGuard<'a, Connection> {
    locked.unwrap_or_else(PoisonError::into_inner)
}
