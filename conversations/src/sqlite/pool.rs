//! The SQLite connections and how async callers use them: one writer, owned by a thread of
//! its own, and a few readers, each used on a `spawn_blocking` thread.
//!
//! Writes are sent to the writer thread, which takes every write waiting when it wakes (at
//! most [`MAX_BATCH`]) and runs them in one transaction, each inside a savepoint of its own:
//! a write that fails is rolled back alone, and every caller gets its answer only after the
//! transaction committed. That savepoint is what makes each write atomic (the store's
//! queries open none of their own); a write alone in its transaction needs none, as the
//! transaction is rolled back if it fails. Under load, one thread hand-off and one commit then
//! serve many writes instead of one each (a `spawn_blocking` hop and a commit per write were
//! what kept the tokio workers waiting, `bench/PROFILE.md`); alone, a write costs what it did.
//!
//! Readers: tasks wait for one on a tokio `Semaphore` (asynchronously), so at most one
//! blocking thread per reader exists and no `std` lock is ever held across `.await`.
//!
//! Searches have readers of their own (`search`), so however many searches run, the other
//! reads find their readers free. A search is stopped when its caller goes away (its future
//! is dropped: the request was cancelled) or when its time is up: a progress handler on its
//! connection interrupts the query, so the reader is free again at once instead of when the
//! query would have ended.

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc, Mutex, MutexGuard, PoisonError, TryLockError,
    },
    time::{Duration, Instant},
};

use rusqlite::Connection;
use tokio::sync::{oneshot, Semaphore};

use crate::error::StoreError;

/// Most writes committed together.
const MAX_BATCH: usize = 64;

/// Prepared statements the writer keeps: every write statement of the store and the batch's
/// own (about 25), where rusqlite keeps 16 by default and would parse some again in turn.
const WRITER_STATEMENTS: usize = 64;

/// How many virtual machine steps a search runs between checks of whether it must stop.
const SEARCH_CHECK_STEPS: std::ffi::c_int = 1000;

/// The writer thread's inbox, `readers.len()` reader connections and the searches' own.
#[derive(Debug)]
pub(crate) struct Pool {
    writes: mpsc::Sender<Box<dyn WriteJob>>,
    readers: Vec<Mutex<Connection>>,
    /// One permit per reader, so a permit holder always finds a free reader.
    read_gate: Arc<Semaphore>,
    /// The connections only searches use.
    search_readers: Vec<Mutex<Connection>>,
    /// One permit per search reader.
    search_gate: Arc<Semaphore>,
}

impl Pool {
    /// Starts the writer thread on `writer` and wraps the readers. `readers` must not be
    /// empty. The thread ends, closing the writer, when the pool is dropped and the writes
    /// sent before have been answered.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub(crate) fn new(
        writer: Connection,
        readers: Vec<Connection>,
        search_readers: Vec<Connection>,
    ) -> std::io::Result<Arc<Self>> {
        writer.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
        let (writes, inbox) = mpsc::channel();
        std::thread::Builder::new()
            .name("rojos-sqlite-writer".to_owned())
            .spawn(move || run_writer(writer, &inbox))?;
        let (reader_count, search_count) = (readers.len(), search_readers.len());
        Ok(Arc::new(Self {
            writes,
            readers: readers.into_iter().map(Mutex::new).collect(),
            read_gate: Arc::new(Semaphore::new(reader_count)),
            search_readers: search_readers.into_iter().map(Mutex::new).collect(),
            search_gate: Arc::new(Semaphore::new(search_count)),
        }))
    }

    /// Runs `work` on the writer connection, on the writer thread, and answers once its
    /// changes are committed (or with the failure that kept them from being committed).
    ///
    /// `action` names the work in the error if the writer cannot run it or it panics.
    pub(crate) async fn write<T, F>(
        self: &Arc<Self>,
        action: &str,
        work: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Job {
            action: action.to_owned(),
            work: Some(work),
            result: None,
            reply,
        });
        let stopped = || StoreError::backend(action, "the database writer thread stopped");
        self.writes.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
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

    /// Runs the search `work` on a free search reader, off the async runtime, within
    /// `limit` (waiting for a reader included). The query is interrupted when the returned
    /// future is dropped (the caller went away) or when `limit` is over, and the reader is
    /// free again at once.
    ///
    /// # Errors
    ///
    /// [`StoreError::SearchTimedOut`] when `limit` is over; `work`'s own errors.
    pub(crate) async fn search<T, F>(
        self: &Arc<Self>,
        action: &str,
        limit: Duration,
        work: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let deadline = Instant::now() + limit;
        let permit = match tokio::time::timeout(
            limit,
            Arc::clone(&self.search_gate).acquire_owned(),
        )
        .await
        {
            Ok(permit) => permit.map_err(|closed| StoreError::backend(action, closed))?,
            Err(_) => return Err(StoreError::SearchTimedOut { limit }),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let _stop_when_dropped = StopWhenDropped(Arc::clone(&stop));
        let pool = Arc::clone(self);
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut conn = free_of(&pool.search_readers);
            let stopping = Arc::clone(&stop);
            conn.progress_handler(
                SEARCH_CHECK_STEPS,
                Some(move || stopping.load(Ordering::Relaxed) || Instant::now() >= deadline),
            );
            let result = work(&mut conn);
            conn.progress_handler(0, None::<fn() -> bool>);
            match result {
                Err(_) if stop.load(Ordering::Relaxed) => {
                    tracing::info!("a search was stopped: its request went away");
                    Err(StoreError::backend(
                        "search",
                        "the search's request went away",
                    ))
                }
                Err(_) if Instant::now() >= deadline => Err(StoreError::SearchTimedOut { limit }),
                result => result,
            }
        });
        job.await
            .map_err(|failed| StoreError::backend(action, failed))?
    }

    /// A reader nobody holds. The caller's read permit guarantees one exists; the
    /// blocking fallback only covers a guard still being dropped by a finished job.
    fn free_reader(&self) -> MutexGuard<'_, Connection> {
        free_of(&self.readers)
    }
}

/// A connection of `connections` nobody holds (see [`Pool::free_reader`]).
fn free_of(connections: &[Mutex<Connection>]) -> MutexGuard<'_, Connection> {
    for reader in connections {
        match reader.try_lock() {
            Ok(conn) => return conn,
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
    }
    relock(connections[0].lock())
}

/// Tells a running search to stop when its caller's future is dropped.
struct StopWhenDropped(Arc<AtomicBool>);

impl Drop for StopWhenDropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One write waiting for the writer thread.
trait WriteJob: Send {
    /// Runs the work on `conn` (once); whether it succeeded, so its changes are kept.
    fn run(&mut self, conn: &mut Connection) -> bool;

    /// Answers the caller: the work's own error if it failed; else its result if the batch
    /// committed (`batch` is `Ok`), or the batch's failure. A job whose batch failed before
    /// it ran gets that failure.
    fn answer(self: Box<Self>, batch: Result<(), &rusqlite::Error>);
}

struct Job<T, F> {
    action: String,
    work: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> WriteJob for Job<T, F>
where
    F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    T: Send + 'static,
{
    fn run(&mut self, conn: &mut Connection) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        // A panic counts as a failure: the batch rolls back the write's savepoint, so the
        // connection is sound, and the caller gets an error instead of a lost answer.
        let result = catch_unwind(AssertUnwindSafe(|| work(conn))).unwrap_or_else(|_| {
            Err(StoreError::backend(
                self.action.as_str(),
                "the database write panicked",
            ))
        });
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn answer(self: Box<Self>, batch: Result<(), &rusqlite::Error>) {
        let action = self.action;
        let result = match (batch, self.result) {
            (Ok(()), Some(result)) | (Err(_), Some(result @ Err(_))) => result,
            (Err(e), _) => Err(StoreError::backend(action, e.to_string())),
            (Ok(()), None) => Err(StoreError::backend(action, "the write was not run")),
        };
        // The caller may have gone away (its request was cancelled): nothing to tell.
        let _ = self.reply.send(result);
    }
}

/// The writer thread: batches of the writes waiting, until the pool is dropped.
fn run_writer(mut conn: Connection, inbox: &mpsc::Receiver<Box<dyn WriteJob>>) {
    while let Ok(first) = inbox.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match inbox.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, batch);
    }
}

/// Runs `batch` in one transaction, each job in its own savepoint unless it is alone, and
/// answers every job after the commit.
fn run_batch(conn: &mut Connection, mut batch: Vec<Box<dyn WriteJob>>) {
    if let Err(e) = control(conn, "BEGIN IMMEDIATE") {
        for job in batch {
            job.answer(Err(&e));
        }
        return;
    }
    if let [job] = batch.as_mut_slice() {
        // Alone, a write needs no savepoint (which costs a copy of every page it changes):
        // if it fails, the whole transaction is rolled back, and it gets its own error.
        if !job.run(conn) {
            if let Err(e) = control(conn, "ROLLBACK") {
                tracing::warn!(error = %e, "cannot roll back a failed write");
            }
            for job in batch {
                job.answer(Ok(()));
            }
            return;
        }
    } else {
        for job in &mut batch {
            run_in_savepoint(conn, job.as_mut());
        }
    }
    match control(conn, "COMMIT") {
        Ok(()) => {
            for job in batch {
                job.answer(Ok(()));
            }
        }
        Err(e) => {
            let _ = control(conn, "ROLLBACK");
            for job in batch {
                job.answer(Err(&e));
            }
        }
    }
}

/// Runs `job` inside a savepoint of its own, rolled back if the job fails, so the batch's
/// other writes are kept.
fn run_in_savepoint(conn: &mut Connection, job: &mut dyn WriteJob) {
    if control(conn, "SAVEPOINT batched_write").is_err() {
        return; // not run: answered with "not run" after the commit
    }
    let undone = if job.run(conn) {
        Ok(())
    } else {
        control(conn, "ROLLBACK TO batched_write")
    };
    if let Err(e) = undone.and_then(|()| control(conn, "RELEASE batched_write")) {
        tracing::warn!(error = %e, "cannot end a batched write's savepoint");
    }
}

/// Runs one of the batch's own statements (the transaction and the savepoints), prepared
/// once and kept in the connection's statement cache, where `execute_batch` parsed it again
/// on every use: two per batch, and two per write in a batch of several.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Takes a lock even if a job panicked while holding it: the panic dropped any
/// open `rusqlite::Transaction`, which rolls back, so the connection is sound.
fn relock<'a, T>(
    locked: Result<MutexGuard<'a, T>, PoisonError<MutexGuard<'a, T>>>,
) -> MutexGuard<'a, T> {
    locked.unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::{
        future::Future,
        pin::{pin, Pin},
        task::{Context, Waker},
    };

    use super::*;

    /// A pool on a fresh WAL database with a table `t(x)`, and an observer connection that
    /// sees only committed rows.
    fn pool() -> (tempfile::TempDir, Arc<Pool>, Arc<Mutex<Connection>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        let observer = Arc::new(Mutex::new(Connection::open(&path).unwrap()));
        let searcher = Connection::open(&path).unwrap();
        (
            dir,
            Pool::new(writer, vec![reader], vec![searcher]).unwrap(),
            observer,
        )
    }

    fn committed(observer: &Mutex<Connection>, x: i64) -> bool {
        relock(observer.lock())
            .query_row("SELECT count(*) FROM t WHERE x = ?1", [x], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
            == 1
    }

    fn insert(conn: &Connection, x: i64) -> Result<(), StoreError> {
        conn.execute("INSERT INTO t (x) VALUES (?1)", [x])
            .map(|_| ())
            .map_err(|e| StoreError::backend("insert", e))
    }

    /// Polls each future once, in order (each sends its job), then returns them to await.
    fn enqueue<F: Future>(futures: &mut [Pin<&mut F>]) {
        let mut context = Context::from_waker(Waker::noop());
        for future in futures.iter_mut() {
            assert!(future.as_mut().poll(&mut context).is_pending());
        }
    }

    /// A query that never ends by itself.
    const ENDLESS: &str =
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";

    /// A search running [`ENDLESS`], and a receiver told once it runs.
    fn endless_search(
        pool: &Arc<Pool>,
        limit: Duration,
    ) -> (
        impl Future<Output = Result<i64, StoreError>> + Send + 'static,
        oneshot::Receiver<()>,
    ) {
        let (started, running) = oneshot::channel();
        let pool = Arc::clone(pool);
        let search = async move {
            pool.search("endless", limit, move |conn| {
                let _ = started.send(());
                conn.query_row(ENDLESS, [], |r| r.get::<_, i64>(0))
                    .map_err(|e| StoreError::backend("endless", e))
            })
            .await
        };
        (search, running)
    }

    fn select_seven(conn: &mut Connection) -> Result<i64, StoreError> {
        conn.query_row("SELECT 7", [], |r| r.get(0))
            .map_err(|e| StoreError::backend("select", e))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_search_whose_caller_went_away_is_interrupted_and_frees_its_reader() {
        let (_dir, pool, _) = pool();
        let (search, running) = endless_search(&pool, Duration::from_secs(3600));
        let caller = tokio::spawn(search);
        running.await.unwrap();
        // Reads do not wait for it: they have readers of their own.
        assert_eq!(pool.read("read", select_seven).await.unwrap(), 7);
        assert!(!caller.is_finished(), "the endless search is still running");
        caller.abort();
        // The pool's only search reader is free again: the next search runs. (Were the
        // endless query not interrupted, it would hold the reader for ever; the guard only
        // turns that into a failure.)
        let next = pool.search("next", Duration::from_secs(3600), select_seven);
        let next = tokio::time::timeout(Duration::from_secs(120), next)
            .await
            .expect("the abandoned search still holds the search reader");
        assert_eq!(next.unwrap(), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_search_past_its_time_limit_is_stopped_and_says_so() {
        let (_dir, pool, _) = pool();
        let (search, _running) = endless_search(&pool, Duration::from_millis(300));
        let failed = search.await.unwrap_err();
        assert!(
            matches!(failed, StoreError::SearchTimedOut { limit } if limit == Duration::from_millis(300)),
            "{failed:?}"
        );
        assert!(failed
            .to_string()
            .contains("search for a longer, more specific text"));
        assert_eq!(
            pool.search("next", Duration::from_secs(60), select_seven)
                .await
                .unwrap(),
            7
        );
    }

    #[tokio::test]
    async fn writes_waiting_together_commit_in_one_transaction_and_answer_after_it() {
        let (_dir, pool, observer) = pool();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        // The first write holds the writer until the others are queued behind it.
        let first = pool.write("first", move |conn| {
            gate.recv().unwrap();
            insert(conn, 0)
        });
        let mut first = pin!(first);
        enqueue(std::slice::from_mut(&mut first));
        let rest: Vec<_> = (1..=5)
            .map(|x| {
                let observer = Arc::clone(&observer);
                pool.write("next", move |conn| {
                    // Inside one batch, the write before this one is not committed yet.
                    let before = committed(&observer, x - 1);
                    insert(conn, x).map(|()| before)
                })
            })
            .collect();
        let mut rest: Vec<_> = rest.into_iter().map(Box::pin).collect();
        let mut pinned: Vec<Pin<&mut _>> = rest.iter_mut().map(|f| f.as_mut()).collect();
        enqueue(&mut pinned);
        open.send(()).unwrap();
        first.await.unwrap();
        let mut seen_before = Vec::new();
        for write in rest {
            seen_before.push(write.await.unwrap());
        }
        // Writes 1..5 waited together, so 2..5 ran in one transaction with the write before
        // them (write 1 may have joined the first write's batch or not, as the writer woke).
        assert_eq!(seen_before[1..], [false, false, false, false]);
        // Every answer came after its commit.
        assert!((0..=5).all(|x| committed(&observer, x)));
    }

    #[tokio::test]
    async fn a_write_alone_runs_without_a_savepoint_and_fails_whole() {
        let (_dir, pool, observer) = pool();
        let savepoint_open = |conn: &Connection| conn.execute_batch("RELEASE batched_write");
        let alone = pool.write("alone", move |conn| {
            let in_transaction = !conn.is_autocommit();
            insert(conn, 1).map(|()| (in_transaction, savepoint_open(conn).is_ok()))
        });
        assert_eq!(alone.await.unwrap(), (true, false));
        assert!(committed(&observer, 1));
        let failed = pool.write("failed", |conn| {
            insert(conn, 2)?;
            Err::<(), _>(StoreError::backend(
                "fail on purpose",
                "the job's own failure",
            ))
        });
        // Its own error, not one of the transaction's.
        let failure = failed.await.unwrap_err().to_string();
        assert!(failure.contains("fail on purpose"), "{failure}");
        let panicked = pool.write("panicked", |conn| -> Result<(), StoreError> {
            insert(conn, 3)?;
            panic!("a deliberate panic in a write alone")
        });
        let panic = panicked.await.unwrap_err().to_string();
        assert!(panic.contains("panicked"), "{panic}");
        // Both were rolled back with their transactions, and the writer is not left in one.
        pool.write("after", |conn| insert(conn, 4)).await.unwrap();
        let rows: Vec<bool> = (1..=4).map(|x| committed(&observer, x)).collect();
        assert_eq!(rows, [true, false, false, true]);
    }

    #[tokio::test]
    async fn a_failed_or_panicking_write_is_rolled_back_alone() {
        let (_dir, pool, observer) = pool();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let hold = pin!(pool.write("hold", move |_| {
            gate.recv().unwrap();
            Ok(())
        }));
        let kept = pool.write("kept", |conn| insert(conn, 1));
        let failed = pool.write("failed", |conn| {
            insert(conn, 2)?;
            Err::<(), _>(StoreError::backend("failed", "the job's own failure"))
        });
        let panicked = pool.write("panicked", |conn| -> Result<(), StoreError> {
            insert(conn, 3)?;
            panic!("a deliberate panic in a batched write")
        });
        let after = pool.write("after", |conn| insert(conn, 4));
        let (mut hold, mut kept, mut failed, mut panicked, mut after) =
            (hold, pin!(kept), pin!(failed), pin!(panicked), pin!(after));
        let mut context = Context::from_waker(Waker::noop());
        for poll in [
            hold.as_mut().poll(&mut context).is_pending(),
            kept.as_mut().poll(&mut context).is_pending(),
            failed.as_mut().poll(&mut context).is_pending(),
            panicked.as_mut().poll(&mut context).is_pending(),
            after.as_mut().poll(&mut context).is_pending(),
        ] {
            assert!(poll);
        }
        open.send(()).unwrap();
        hold.await.unwrap();
        kept.await.unwrap();
        let failure = failed.await.unwrap_err().to_string();
        assert!(failure.contains("failed"), "{failure}");
        let panic = panicked.await.unwrap_err().to_string();
        assert!(panic.contains("panicked"), "{panic}");
        after.await.unwrap();
        let rows: Vec<bool> = (1..=4).map(|x| committed(&observer, x)).collect();
        assert_eq!(rows, [true, false, false, true]);
        // The writer still works after the panic.
        pool.write("later", |conn| insert(conn, 5)).await.unwrap();
        assert!(committed(&observer, 5));
    }
}
