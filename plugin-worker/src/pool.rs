//! The workers of one plugin library: one per project it is called on, started on the first
//! call there, ended when idle, started again (with back-off after crashes) when one died,
//! and quarantined ([`QuarantineRule`]) when they keep dying: a quarantined pool starts no
//! worker and refuses every call; it lasts as long as the pool, which is the life of one file
//! content (a replaced file is loaded into a new pool).
//!
//! A worker per (library, project) because Landlock confines a process for good: a worker
//! confined to one project's root cannot be given another's later, and a worker allowed the
//! whole storage would let a plugin read every project (docs/security.md, "Plugin workers").

use std::{
    collections::{HashMap, VecDeque},
    os::fd::BorrowedFd,
    path::PathBuf,
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;

use crate::{
    lane::LaneStop,
    lock,
    protocol::{Call, Start},
    record,
    sandbox::{identity, SandboxSettings},
    supervisor::{Answer, Ended, Launch, OnLane, StartError, Worker},
    zygote_handle::Zygote,
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
    /// When dying workers quarantine the library (`None`: never).
    pub quarantine: Option<QuarantineRule>,
    /// The folder of quarantine records (`record.rs`), so a quarantine outlives the server;
    /// `None`: it is kept in memory only.
    pub records: Option<PathBuf>,
    /// The zygote that forks the workers; `None`: each is started by `exec` of `program`.
    pub zygote: Option<Arc<Zygote>>,
}

/// A library whose workers died `deaths` times within `window` (crashed, were killed by a
/// signal, exited, or died while starting; not the ones the server ended at a deadline) is
/// quarantined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineRule {
    /// How many deaths quarantine the library (at least 1).
    pub deaths: u32,
    /// Within how long.
    pub window: Duration,
}

impl Default for QuarantineRule {
    fn default() -> Self {
        QuarantineRule {
            deaths: 5,
            window: Duration::from_secs(600),
        }
    }
}

/// Which project a worker serves: the id and the root folder's identity (a project removed
/// and made again under the same id is another folder).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProjectKey {
    /// The project id.
    pub id: String,
    /// The root's device, inode and birth time (seconds, nanoseconds): a folder made where a
    /// removed one was may be given the same inode number, and must not reach the worker
    /// confined to the removed one.
    pub root: (u64, u64, i64, u32),
    /// The root's owner (uid, gid): a worker of a server running as root runs as that user
    /// when it is not root ([`crate::sandbox::identity`]); a root given to another owner gets
    /// a new worker.
    pub owner: (u32, u32),
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
    /// The library is quarantined: the call was not run. The reason.
    Quarantined(String),
    /// Its workers died recently and the next one starts only after this wait, which ends
    /// past the call's deadline: the call was not run (a shorter wait is waited out).
    BackingOff {
        /// Recent deaths.
        deaths: u32,
        /// The wait left.
        wait: Duration,
    },
}

/// How a call offered to a worker's lane went ([`WorkerPool::call_on_lane`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneCall {
    /// Not sent: the project has no running worker, or its lane is taken; make the call
    /// with [`WorkerPool::call`].
    Unavailable,
    /// Stopped ([`LaneStop`]) before it was sent, or while it ran (its worker was ended).
    Stopped,
    /// How it ended.
    Done(Outcome),
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

/// Recent crashes, for the back-off before the next start and the quarantine.
#[derive(Debug, Default)]
struct Crashes {
    /// Each project's recent deaths, for its own back-off: a plugin that crashes in one
    /// project does not delay the start of its workers for other projects.
    recent: HashMap<ProjectKey, Recent>,
    /// When workers died, within the quarantine's window.
    deaths: VecDeque<Instant>,
    /// Why the library is quarantined, once it is.
    quarantined: Option<String>,
}

/// One project's recent worker deaths.
#[derive(Debug, Clone, Copy)]
struct Recent {
    count: u32,
    last: Instant,
}

/// Crashes further apart than this are not counted together.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// The longest wait before starting a worker again.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl WorkerPool {
    /// A pool with no workers yet.
    pub fn new(settings: PoolSettings) -> Arc<WorkerPool> {
        // A quarantine an earlier server decided for this very content still holds.
        let quarantined = settings
            .records
            .as_deref()
            .and_then(|records| record::read(records, &settings.library))
            .map(|record| record.reason);
        if let Some(reason) = &quarantined {
            tracing::error!(tool = %settings.tool, "tool plugin '{}' is quarantined: {reason}; it is not offered to models and its calls are refused until its file is replaced by a different build", settings.tool);
        }
        Arc::new(WorkerPool {
            settings,
            workers: Mutex::default(),
            crashes: Mutex::new(Crashes {
                quarantined,
                ..Crashes::default()
            }),
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
        call: Call<'_>,
        deadline: tokio::time::Instant,
    ) -> Outcome {
        if let Some(reason) = self.quarantined() {
            return Outcome::Quarantined(reason);
        }
        let mut outcome = self.call_once(&project, root, call, deadline).await;
        if outcome == Outcome::Ended(Ended::NotSent) {
            // The worker was ending as the call came; the call never reached it.
            outcome = self.call_once(&project, root, call, deadline).await;
        }
        outcome
    }

    async fn call_once(
        self: &Arc<Self>,
        project: &ProjectKey,
        root: BorrowedFd<'_>,
        call: Call<'_>,
        deadline: tokio::time::Instant,
    ) -> Outcome {
        let wait = self.backoff(project);
        if !wait.is_zero()
            && !self.has_live_worker(project)
            && tokio::time::Instant::now() + wait >= deadline
        {
            let deaths = lock(&self.crashes)
                .recent
                .get(project)
                .map_or(0, |recent| recent.count);
            return Outcome::BackingOff { deaths, wait };
        }
        let worker = match tokio::time::timeout_at(deadline, self.worker(project, root)).await {
            Ok(Ok(worker)) => worker,
            Ok(Err(e)) => {
                if let StartError::Died(cause) = &e {
                    self.died(project, &format!("{cause} while starting"));
                }
                return Outcome::NotStarted(e);
            }
            Err(_) => return Outcome::TimedOut,
        };
        // Dropped before the answer (the caller went away): the plugin's code may still run
        // on a thread of the worker, which cannot be stopped but with the worker.
        let mut abandoned = Abandoned {
            pool: self,
            project,
            worker: &worker,
            armed: true,
        };
        let answer = tokio::time::timeout_at(deadline, worker.call(call)).await;
        abandoned.armed = false;
        match answer {
            Ok(answer) => self.settle(project, &worker, answer),
            Err(_) => {
                worker.kill();
                self.forget(project, &worker);
                Outcome::TimedOut
            }
        }
    }

    /// [`WorkerPool::call`] from a blocking thread, over the lane of `project`'s worker
    /// ([`Worker::call_on_lane`]): this thread sends the call and reads the answer itself.
    /// [`LaneCall::Unavailable`] when the project has no running worker (its start is
    /// [`WorkerPool::call`]'s) or another call holds the lane.
    pub fn call_on_lane(
        &self,
        project: &ProjectKey,
        call: Call<'_>,
        deadline: tokio::time::Instant,
        stop: &LaneStop,
    ) -> LaneCall {
        if let Some(reason) = self.quarantined() {
            return LaneCall::Done(Outcome::Quarantined(reason));
        }
        let Some(worker) = self.live_worker(project) else {
            return LaneCall::Unavailable;
        };
        match worker.call_on_lane(call, deadline.into_std(), stop) {
            OnLane::Unavailable => LaneCall::Unavailable,
            OnLane::Stopped => LaneCall::Stopped,
            OnLane::TimedOut => {
                worker.kill();
                self.forget(project, &worker);
                LaneCall::Done(Outcome::TimedOut)
            }
            OnLane::Answered(answer) => LaneCall::Done(self.settle(project, &worker, answer)),
        }
    }

    /// The outcome of `worker`'s `answer`: a worker that ended is dropped from the pool, and
    /// its death counted once.
    fn settle(&self, project: &ProjectKey, worker: &Arc<Worker>, answer: Answer) -> Outcome {
        match answer {
            Ok(result) => Outcome::Returned(result),
            Err(ended) => {
                self.forget(project, worker);
                if let Ended::Died(cause) = &ended {
                    if worker.count_death() {
                        self.died(project, cause);
                    }
                }
                Outcome::Ended(ended)
            }
        }
    }

    /// Why the library is quarantined, if it is.
    pub fn quarantined(&self) -> Option<String> {
        lock(&self.crashes).quarantined.clone()
    }

    /// Whether `project` has a worker that has not ended (no start, so no back-off, needed).
    fn has_live_worker(&self, project: &ProjectKey) -> bool {
        self.live_worker(project).is_some()
    }

    /// `project`'s worker, if it has one that has not ended.
    fn live_worker(&self, project: &ProjectKey) -> Option<Arc<Worker>> {
        lock(&self.workers)
            .get(project)
            .and_then(|slot| slot.get())
            .filter(|w| !w.has_ended())
            .cloned()
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
                tokio::time::sleep(self.backoff(project)).await;
                let mut sandbox = self.settings.sandbox;
                sandbox.user =
                    identity::choose(identity::is_root(), Some(project.owner), sandbox.user);
                let start = Start {
                    library: self.settings.library.clone(),
                    project_id: Some(project.id.clone()),
                    sandbox,
                    // Set by `Worker::start`, which makes the lane.
                    lane: false,
                };
                let launch = match &self.settings.zygote {
                    Some(zygote) => Launch::Fork(zygote),
                    None => Launch::Exec(&self.settings.program),
                };
                Worker::start(launch, start, Some(root), &self.settings.tool).await
            })
            .await?;
        self.reaper.call_once(|| {
            tokio::spawn(reap(Arc::downgrade(self), self.settings.idle));
        });
        Ok(Arc::clone(worker))
    }

    /// Drops `worker` from the pool.
    fn forget(&self, project: &ProjectKey, worker: &Arc<Worker>) {
        let mut workers = lock(&self.workers);
        if let Some(slot) = workers.get(project) {
            if slot.get().is_some_and(|w| Arc::ptr_eq(w, worker)) {
                workers.remove(project);
            }
        }
    }

    /// Counts a worker's death (`cause`, e.g. `crashed (SIGSEGV)`) for the back-off and the
    /// quarantine; quarantines the library when the rule says so (one ERROR in the log).
    fn died(&self, project: &ProjectKey, cause: &str) {
        let mut crashes = lock(&self.crashes);
        let now = Instant::now();
        crashes
            .recent
            .retain(|_, recent| recent.last.elapsed() <= CRASH_WINDOW);
        let recent = crashes.recent.entry(project.clone()).or_insert(Recent {
            count: 0,
            last: now,
        });
        recent.count += 1;
        recent.last = now;
        let recent = recent.count;
        let tool = &self.settings.tool;
        let Some(rule) = self.settings.quarantine else {
            tracing::warn!(tool = %tool, recent, "plugin worker {cause}; it is started again for the next call");
            return;
        };
        crashes.deaths.push_back(now);
        while crashes
            .deaths
            .front()
            .is_some_and(|at| now.duration_since(*at) > rule.window)
        {
            crashes.deaths.pop_front();
        }
        if crashes.quarantined.is_some() {
            return;
        }
        let deaths = u32::try_from(crashes.deaths.len()).unwrap_or(u32::MAX);
        if deaths < rule.deaths {
            tracing::warn!(tool = %tool, recent, "plugin worker {cause}; it is started again for the next call ({deaths} of the {} deaths in {} s that quarantine it)", rule.deaths, rule.window.as_secs());
            return;
        }
        let reason = format!(
            "its worker died {deaths} times within {} s (the last one {cause})",
            rule.window.as_secs()
        );
        tracing::error!(
            tool = %tool,
            "tool plugin '{tool}' is quarantined: {reason}; it is not offered to models and its calls are refused until its file is replaced by a different build"
        );
        if let Some(records) = &self.settings.records {
            let record = record::QuarantineRecord {
                tool: tool.clone(),
                reason: reason.clone(),
            };
            if let Err(e) = record::write(records, &self.settings.library, &record) {
                tracing::warn!(tool = %tool, error = %e, "the quarantine could not be recorded: a restart lifts it");
            }
        }
        crashes.quarantined = Some(reason);
    }

    /// How long to wait before starting `project`'s worker: doubling from 50 ms with each
    /// recent death of that project's workers.
    fn backoff(&self, project: &ProjectKey) -> Duration {
        let crashes = lock(&self.crashes);
        match crashes.recent.get(project) {
            Some(recent) if recent.count > 0 && recent.last.elapsed() < CRASH_WINDOW => {
                let doubled = Duration::from_millis(50) * 2u32.saturating_pow(recent.count - 1);
                doubled
                    .min(MAX_BACKOFF)
                    .saturating_sub(recent.last.elapsed())
            }
            _ => Duration::ZERO,
        }
    }
}

/// Ends a worker whose call was dropped before it answered (docs/plugins.md, "Isolation").
struct Abandoned<'a> {
    pool: &'a WorkerPool,
    project: &'a ProjectKey,
    worker: &'a Arc<Worker>,
    armed: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(tool = %self.pool.settings.tool, "a call was cancelled while its plugin ran; its worker is ended");
            self.worker.kill();
            self.pool.forget(self.project, self.worker);
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
