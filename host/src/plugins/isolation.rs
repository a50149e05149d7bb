//! Where a plugin's code runs ([`Isolation`]), how its workers are started
//! ([`WorkerSettings`], from `[plugins]` in the config), and one call through a worker
//! ([`call_in_worker`]): the server's checks and the [`AroundCall`] work stay in the server;
//! only the plugin's `call` runs in the worker, which is ended if the deadline passes.

use std::{os::fd::AsFd, path::PathBuf, sync::Arc, time::Duration};

use rojos_plugin_worker::{
    Call, Ended, Outcome, PoolSettings, ProjectKey, QuarantineRule, SandboxSettings, WorkerPool,
    Zygote,
};
use serde::Deserialize;

use super::{
    call::{plugin_failure, AroundCall, CallRequest},
    outcome::{FailureKind, ToolFailure, ToolOutcome},
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
/// before and after (on a blocking thread), ending the worker if `deadline` passes.
pub(super) async fn call_in_worker(
    pool: &Arc<WorkerPool>,
    name: &str,
    args: &str,
    request: &CallRequest,
    mut around: Option<Box<dyn AroundCall>>,
    deadline: tokio::time::Instant,
) -> ToolOutcome {
    if let Some(reason) = pool.quarantined() {
        return Err(quarantined(name, &reason));
    }
    if let Some(mut work) = around.take() {
        let before = tokio::task::spawn_blocking(move || {
            let refusal = work.before();
            (work, refusal)
        })
        .await;
        match before {
            Ok((work, Ok(()))) => around = Some(work),
            Ok((_, Err(refusal))) => return Err(ToolFailure::new(FailureKind::Refused, refusal)),
            Err(join) => return Err(host_failure(name, &join)),
        }
        // `before` may have waited for the project's lock (held by an undo) past the deadline:
        // then the plugin is not sent the call at all.
        if tokio::time::Instant::now() >= deadline {
            if let Some(mut work) = around {
                let _ = tokio::task::spawn_blocking(move || work.after()).await;
            }
            return Err(super::call::not_started(name, request.timeout));
        }
    }
    let identity = rustix::fs::statx(
        request.root.as_fd(),
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::INO
            | rustix::fs::StatxFlags::BTIME
            | rustix::fs::StatxFlags::UID
            | rustix::fs::StatxFlags::GID,
    );
    let outcome = match identity {
        Ok(stat) => {
            let device = rustix::fs::makedev(stat.stx_dev_major, stat.stx_dev_minor);
            let key = ProjectKey {
                id: request.project_id.clone(),
                root: (
                    device,
                    stat.stx_ino,
                    stat.stx_btime.tv_sec,
                    stat.stx_btime.tv_nsec,
                ),
                owner: (stat.stx_uid, stat.stx_gid),
            };
            let call = Call {
                limits: request.limits,
                create_only: &request.create_only,
                args,
            };
            // A stopped run drops the call, which ends the worker running it (the pool's
            // `Abandoned`): no thread is left running the plugin's code for nobody.
            tokio::select! {
                outcome = pool.call(key, request.root.as_fd(), call, deadline) => Some(outcome),
                () = request.stop.cancelled() => None,
            }
        }
        Err(e) => return Err(host_failure(name, &e)),
    };
    // The plugin's code is no longer running (it returned, or its worker is gone).
    if let Some(mut work) = around {
        let _ = tokio::task::spawn_blocking(move || work.after()).await;
    }
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
