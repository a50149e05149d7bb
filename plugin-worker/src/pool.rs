//! The workers of one plugin library: one per project it is called on, started on the first
//! call there, ended when idle, started again (with back-off after crashes) when one died.
//!
//! A worker per (library, project) because Landlock confines a process for good: a worker
//! confined to one project's root cannot be given another's later, and a worker allowed the
//! whole storage would let a plugin read every project (docs/security.md, "Plugin workers").

use std::{
    collections::HashMap,
    os::fd::BorrowedFd,
    path::PathBuf,
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use rojos_plugin_api::Limits;
use tokio::sync::OnceCell;

use crate::{
    protocol::Start,
    sandbox::SandboxSettings,
    supervisor::{Ended, StartError, Worker},
};

/// What a pool starts its workers with.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The binary started as `PROGRAM plugin-worker` (the server's own).
    pub program: PathBuf,
    /// The library, as the server's private copy.
    pub library: PathBuf,
    /// The tool's name, for the log.
    pub tool: String,
    /// The sandbox and limits.
    pub sandbox: SandboxSettings,
    /// How long a worker with no calls stays.
    pub idle: Duration,
}

/// Which project a worker serves: the id and the root folder's identity (a project removed
/// and made again under the same id is another folder).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProjectKey {
    /// The project id.
    pub id: String,
    /// The root's device and inode.
    pub root: (u64, u64),
}

/// How one call through a worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The plugin returned: its text, or its error (a `ToolError` as JSON).
    Returned(Result<String, String>),
    /// The worker ended first.
    Ended(Ended),
    /// The deadline passed: the worker was ended.
    TimedOut,
    /// No worker could be started.
    NotStarted(StartError),
}

type Slot = Arc<OnceCell<Arc<Worker>>>;

/// The workers of one library.
#[derive(Debug)]
pub struct WorkerPool {
    settings: PoolSettings,
    workers: Mutex<HashMap<ProjectKey, Slot>>,
    crashes: Mutex<Crashes>,
    reaper: std::sync::Once,
}

/// Recent crashes, for the back-off before the next start.
#[derive(Debug, Default)]
struct Crashes {
    recent: u32,
    last: Option<Instant>,
}

/// Crashes further apart than this are not counted together.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// The longest wait before starting a worker again.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl WorkerPool {
    /// A pool with no workers yet.
    pub fn new(settings: PoolSettings) -> Arc<WorkerPool> {
        Arc::new(WorkerPool {
            settings,
            workers: Mutex::default(),
            crashes: Mutex::default(),
            reaper: std::sync::Once::new(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    /// Runs one call on `project`'s worker (started with `root` if there is none), ending
    /// the worker if the call is not done by `deadline`.
    pub async fn call(
        self: &Arc<Self>,
        project: ProjectKey,
        root: BorrowedFd<'_>,
        limits: Limits,
        args: &str,
        deadline: tokio::time::Instant,
    ) -> Outcome {
        let mut outcome = self.call_once(&project, root, limits, args, deadline).await;
        if outcome == Outcome::Ended(Ended::NotSent) {
            // The worker was ending as the call came; the call never reached it.
            outcome = self.call_once(&project, root, limits, args, deadline).await;
        }
        outcome
    }

    async fn call_once(
        self: &Arc<Self>,
        project: &ProjectKey,
        root: BorrowedFd<'_>,
        limits: Limits,
        args: &str,
        deadline: tokio::time::Instant,
    ) -> Outcome {
        let worker = match tokio::time::timeout_at(deadline, self.worker(project, root)).await {
            Ok(Ok(worker)) => worker,
            Ok(Err(e)) => return Outcome::NotStarted(e),
            Err(_) => return Outcome::TimedOut,
        };
        match tokio::time::timeout_at(deadline, worker.call(limits, args)).await {
            Ok(Ok(result)) => Outcome::Returned(result),
            Ok(Err(ended)) => {
                self.forget(project, &worker, matches!(ended, Ended::Died(_)));
                Outcome::Ended(ended)
            }
            Err(_) => {
                worker.kill();
                self.forget(project, &worker, false);
                Outcome::TimedOut
            }
        }
    }

    /// How many workers are alive.
    pub fn live_workers(&self) -> usize {
        lock(&self.workers)
            .values()
            .filter(|slot| slot.get().is_some_and(|w| !w.has_ended()))
            .count()
    }

    /// The project's worker, started if there is none (or it ended).
    async fn worker(
        self: &Arc<Self>,
        project: &ProjectKey,
        root: BorrowedFd<'_>,
    ) -> Result<Arc<Worker>, StartError> {
        let slot = {
            let mut workers = lock(&self.workers);
            let slot = workers.entry(project.clone()).or_default();
            if slot.get().is_some_and(|w| w.has_ended()) {
                *slot = Slot::default();
            }
            Arc::clone(slot)
        };
        let worker = slot
            .get_or_try_init(|| async {
                tokio::time::sleep(self.backoff()).await;
                let start = Start {
                    library: self.settings.library.clone(),
                    project_id: Some(project.id.clone()),
                    sandbox: self.settings.sandbox,
                };
                Worker::start(
                    &self.settings.program,
                    start,
                    Some(root),
                    &self.settings.tool,
                )
                .await
            })
            .await?;
        self.reaper.call_once(|| {
            tokio::spawn(reap(Arc::downgrade(self), self.settings.idle));
        });
        Ok(Arc::clone(worker))
    }

    /// Drops `worker` from the pool (a crash is counted for the back-off).
    fn forget(&self, project: &ProjectKey, worker: &Arc<Worker>, crashed: bool) {
        let mut workers = lock(&self.workers);
        if let Some(slot) = workers.get(project) {
            if slot.get().is_some_and(|w| Arc::ptr_eq(w, worker)) {
                workers.remove(project);
            }
        }
        if crashed {
            let mut crashes = lock(&self.crashes);
            if crashes.last.is_some_and(|at| at.elapsed() > CRASH_WINDOW) {
                crashes.recent = 0;
            }
            crashes.recent += 1;
            crashes.last = Some(Instant::now());
            tracing::warn!(tool = %self.settings.tool, recent = crashes.recent, "plugin worker died; it is started again for the next call");
        }
    }

    /// How long to wait before starting a worker: doubling from 50 ms with each recent crash.
    fn backoff(&self) -> Duration {
        let crashes = lock(&self.crashes);
        match crashes.last {
            Some(at) if crashes.recent > 0 && at.elapsed() < CRASH_WINDOW => {
                let doubled = Duration::from_millis(50) * 2u32.saturating_pow(crashes.recent - 1);
                doubled.min(MAX_BACKOFF).saturating_sub(at.elapsed())
            }
            _ => Duration::ZERO,
        }
    }
}

/// Ends the pool's idle workers now and then, until the pool is gone.
async fn reap(pool: Weak<WorkerPool>, idle: Duration) {
    let every = (idle / 2).max(Duration::from_millis(100));
    loop {
        tokio::time::sleep(every).await;
        let Some(pool) = pool.upgrade() else { return };
        lock(&pool.workers).retain(|_, slot| {
            slot.get()
                .is_none_or(|w| !w.has_ended() && !w.is_idle_for(idle))
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
