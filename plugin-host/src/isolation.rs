//! Where a plugin's code runs ([`Isolation`]), how its workers are started
//! ([`WorkerSettings`], from `[plugins]` in the config), and one call through a worker
//! ([`call_in_worker`]): the server's checks and the [`AroundCall`] work stay in the server;
//! only the plugin's `call` runs in the worker, which is ended if the deadline passes.

use std::{os::fd::AsFd, path::PathBuf, sync::Arc, time::Duration};

use rojos_plugin_worker::{
    Call, Ended, LaneCall, LaneStop, Outcome, PoolSettings, ProjectKey, QuarantineRule,
    SandboxSettings, WorkerPool, Zygote,
};
use serde::Deserialize;

use super::{
    call::{plugin_failure, AroundCall, CallRequest},
    outcome::{FailureKind, ToolFailure, ToolOutcome},
    start::{not_started, wait_for_thread, Start, Waited},
};

/// Where a plugin's code runs (`isolation` in `[plugins]`; drop-ins always in workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// In the server's own process: fastest, but a crash, a leak or a hostile plugin reaches
    /// the whole server.
    #[default]
    InProcess,
    /// In sandboxed worker processes, one per project it is called on (docs/plugins.md).
    Worker,
}

/// How a new worker's process is started (`worker_start` in `[plugins]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerStart {
    /// Forked by the server's plugin zygote, which runs the server's binary but holds no
    /// plugin code (docs/plugins.md, "Isolation"): a fork of a small process.
    #[default]
    Zygote,
    /// `exec` of the server's binary for each worker.
    Exec,
}

/// How workers are started.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The binary started as `PROGRAM plugin-worker` (and `PROGRAM plugin-zygote`).
    pub program: PathBuf,
    /// The zygote that forks workers (`None`: each worker is started by `exec`); one for
    /// every library, started on the first worker's start.
    pub zygote: Option<Arc<Zygote>>,
    /// The sandbox and limits.
    pub sandbox: SandboxSettings,
    /// How long a worker with no calls stays.
    pub idle: Duration,
    /// How long a worker may take to start and open its library.
    pub start_timeout: Duration,
    /// When a library whose workers keep dying is quarantined (`None`: never).
    pub quarantine: Option<QuarantineRule>,
    /// Where quarantines are recorded (`<storage>/quarantine`), so they outlive the server;
    /// `None`: in memory only.
    pub records: Option<PathBuf>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("rojos"));
        WorkerSettings {
            zygote: Some(Zygote::new(program.clone())),
            program,
            sandbox: SandboxSettings::default(),
            idle: Duration::from_secs(60),
            start_timeout: Duration::from_secs(10),
            quarantine: Some(QuarantineRule::default()),
            records: None,
        }
    }
}

impl WorkerSettings {
    /// Starts workers as `start` says, from `program`: a zygote is made only when there is
    /// none for `program` yet, so the running one (and its workers) stays.
    pub fn set_start(&mut self, program: PathBuf, start: WorkerStart) {
        self.zygote = match (start, self.zygote.take()) {
            (WorkerStart::Exec, _) => None,
            (WorkerStart::Zygote, Some(zygote)) if zygote.program() == program => Some(zygote),
            (WorkerStart::Zygote, _) => Some(Zygote::new(program.clone())),
        };
        self.program = program;
    }

    /// The settings of the pool for the library at `copy`, whose tool is `tool`.
    pub(crate) fn pool(&self, copy: PathBuf, tool: &str) -> PoolSettings {
        PoolSettings {
            program: self.program.clone(),
            library: copy,
            tool: tool.to_owned(),
            sandbox: self.sandbox,
            idle: self.idle,
            quarantine: self.quarantine,
            records: self.records.clone(),
            zygote: self.zygote.clone(),
        }
    }
}

/// Runs one call of tool `name` in its worker for the request's project, with `around` just
/// before and after, ending the worker if `deadline` passes.
///
/// A call with `around` runs all three on one blocking thread, which waits there for the
/// worker's answer, as the in-process path does (`invoke`): one hand-off to a thread and back
/// per call instead of two. That thread sends the call over the worker's lane and reads the
/// answer itself when it can ([`WorkerPool::call_on_lane`]): the answer then wakes only it.
pub(super) async fn call_in_worker(
    pool: &Arc<WorkerPool>,
    name: &str,
    args: &str,
    request: &CallRequest,
    around: Option<Box<dyn AroundCall>>,
    deadline: tokio::time::Instant,
) -> ToolOutcome {
    if let Some(reason) = pool.quarantined() {
        return Err(quarantined(name, &reason));
    }
    let key = project_key(request).map_err(|e| host_failure(name, &e))?;
    let outcome = match around {
        None => worker_call(pool, key, args, request, &request.stop, deadline).await,
        Some(mut work) => {
            let (pool, args, sent) = (Arc::clone(pool), args.to_owned(), request.clone());
            // Dropping this call (its run was stopped) ends the wait on the blocking thread,
            // and with it the worker's call, as it does for a call without `around`.
            let stop = sent.stop.child_token();
            let _stop_on_drop = stop.clone().drop_guard();
            let lane_stop = Arc::new(LaneStop::default());
            let _stop_lane_on_drop = StopLaneOnDrop(Arc::clone(&lane_stop));
            let runtime = tokio::runtime::Handle::current();
            let start = Arc::new(Start::default());
            let mut thread = tokio::task::spawn_blocking({
                let (start, lane_stop) = (Arc::clone(&start), Arc::clone(&lane_stop));
                move || {
                    work.before()
                        .map_err(|refusal| ToolFailure::new(FailureKind::Refused, refusal))?;
                    // `before` may have waited for the project's lock (held by an undo): a
                    // call given up meanwhile (its deadline, its run stopped) is not sent.
                    if !start.run() || tokio::time::Instant::now() >= deadline {
                        work.after();
                        return Ok(None);
                    }
                    let call = Call {
                        limits: sent.limits,
                        create_only: &sent.create_only,
                        args: &args,
                    };
                    let outcome = match pool.call_on_lane(&key, call, deadline, &lane_stop) {
                        LaneCall::Done(outcome) => Some(outcome),
                        LaneCall::Stopped => None,
                        LaneCall::Unavailable => {
                            runtime.block_on(worker_call(&pool, key, &args, &sent, &stop, deadline))
                        }
                    };
                    // The plugin's code is no longer running (it returned, or its worker is gone).
                    work.after();
                    Ok(Some(outcome))
                }
            });
            let waited = {
                let waiting = wait_for_thread(&mut thread, &start, Some(&request.stop), deadline);
                tokio::pin!(waiting);
                tokio::select! {
                    waited = &mut waiting => waited,
                    // A thread waiting on the lane does not hear the stop: its worker is ended.
                    () = request.stop.cancelled() => {
                        lane_stop.stop();
                        waiting.await
                    }
                }
            };
            let joined = match waited {
                Waited::Joined(joined) => joined,
                Waited::NotStarted { stopped } => {
                    return Err(not_started(name, request.timeout, stopped));
                }
                // The worker's call has the same deadline: the thread is about to end. A worker
                // that keeps its lane's answer coming a byte at a time is ended.
                Waited::PastDeadline => match tokio::time::timeout(LANE_GRACE, &mut thread).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        lane_stop.stop();
                        thread.await
                    }
                },
            };
            match joined {
                Ok(Ok(Some(outcome))) => outcome,
                // The deadline passed as `before` ended.
                Ok(Ok(None)) => return Err(not_started(name, request.timeout, false)),
                Ok(Err(failure)) => return Err(failure),
                Err(join) => return Err(host_failure(name, &join)),
            }
        }
    };
    let Some(outcome) = outcome else {
        tracing::info!(tool = %name, "a call's run was stopped while its plugin ran; its worker was ended");
        return Err(ToolFailure::new(
            FailureKind::Refused,
            format!("the tool plugin '{name}' was stopped while running this call: the run was stopped, and its worker was ended"),
        ));
    };
    match outcome {
        Outcome::Returned(Ok(text)) => Ok(text),
        Outcome::Returned(Err(json)) => Err(plugin_failure(&json)),
        Outcome::Ended(Ended::Died(cause)) => {
            let next = match pool.quarantined() {
                Some(reason) => format!("it is now quarantined ({reason}) until its file is replaced"),
                None => "it is started again for the next call".to_owned(),
            };
            Err(ToolFailure::new(
                FailureKind::Crashed,
                format!("the tool plugin '{name}' {cause} while running this call; {next}"),
            ))
        }
        Outcome::Ended(Ended::NotSent) => Err(ToolFailure::new(
            FailureKind::Host,
            format!("the tool plugin '{name}' could not take the call: its worker was ending; try again"),
        )),
        Outcome::Ended(Ended::Stopped) => Err(ToolFailure::new(
            FailureKind::Crashed,
            format!("the tool plugin '{name}' was stopped while running this call: another of its calls on this project ran past its deadline or was cancelled"),
        )),
        Outcome::TimedOut => {
            let timeout = request.timeout.as_secs_f64();
            tracing::warn!(tool = %name, timeout, "tool call timed out; its worker was ended");
            Err(ToolFailure::new(
                FailureKind::Timeout,
                format!("tool {name} did not finish within {timeout:.1} s; its worker was stopped"),
            ))
        }
        Outcome::Quarantined(reason) => Err(quarantined(name, &reason)),
        Outcome::BackingOff { deaths, wait } => Err(ToolFailure::new(
            FailureKind::Busy,
            format!(
                "the tool plugin '{name}' was not run: its worker died {deaths} times in the last minute and is started again in {:.1} s; try again then",
                wait.as_secs_f64().max(0.1)
            ),
        )),
        Outcome::NotStarted(e) => Err(ToolFailure::new(
            FailureKind::Host,
            format!("the tool plugin '{name}' could not be started: {e}"),
        )),
    }
}

/// How long past its deadline a call on a worker's lane may still be answering before its
/// worker is ended: its own time-out on the lane ends it first unless the worker trickles.
const LANE_GRACE: Duration = Duration::from_secs(1);

/// Stops a lane's call ([`LaneStop`]) when the call is dropped: its run was stopped. (Dropped
/// once the call has ended, it ends nothing: no call of it runs on the lane any more.)
struct StopLaneOnDrop(Arc<LaneStop>);

impl Drop for StopLaneOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The project a call's worker serves: its id, and the identity and owner of its root
/// folder (a folder made again at the same path is another project to the pool).
fn project_key(request: &CallRequest) -> rustix::io::Result<ProjectKey> {
    let stat = rustix::fs::statx(
        request.root.as_fd(),
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::INO
            | rustix::fs::StatxFlags::BTIME
            | rustix::fs::StatxFlags::UID
            | rustix::fs::StatxFlags::GID,
    )?;
    let device = rustix::fs::makedev(stat.stx_dev_major, stat.stx_dev_minor);
    Ok(ProjectKey {
        id: request.project_id.clone(),
        root: (
            device,
            stat.stx_ino,
            stat.stx_btime.tv_sec,
            stat.stx_btime.tv_nsec,
        ),
        owner: (stat.stx_uid, stat.stx_gid),
    })
}

/// The call in its worker, until it answers, `stop` is cancelled or `deadline` passes;
/// `None` when stopped.
async fn worker_call(
    pool: &Arc<WorkerPool>,
    key: ProjectKey,
    args: &str,
    request: &CallRequest,
    stop: &tokio_util::sync::CancellationToken,
    deadline: tokio::time::Instant,
) -> Option<Outcome> {
    let call = Call {
        limits: request.limits,
        create_only: &request.create_only,
        args,
    };
    // A stopped run drops the call, which ends the worker running it (the pool's
    // `Abandoned`): no thread is left running the plugin's code for nobody.
    // Biased, stop first: a call whose run is already stopped is never sent.
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        outcome = pool.call(key, request.root.as_fd(), call, deadline) => Some(outcome),
    }
}

/// The refusal of a call to a quarantined plugin.
fn quarantined(name: &str, reason: &str) -> ToolFailure {
    ToolFailure::new(
        FailureKind::Refused,
        format!("the tool plugin '{name}' is quarantined and was not run: {reason}; it stays so until its file is replaced"),
    )
}

fn host_failure(name: &str, e: &dyn std::fmt::Display) -> ToolFailure {
    ToolFailure::new(
        FailureKind::Host,
        format!("tool {name} failed inside the host: {e}"),
    )
}
