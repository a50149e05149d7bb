//! Reading a plugin's manifest in a worker, for a plugin that never runs in the server: a
//! worker serving no project starts (sandboxed before it opens the library), reports the
//! manifest and is told to end. It is forked by the server's plugin zygote when there is one
//! (no `exec` of the server's binary per load), else started by `exec`; confined alike either
//! way. Blocking: plugins are loaded outside the async runtime.

use std::{
    os::{
        fd::{AsFd, OwnedFd},
        unix::net::UnixStream,
    },
    path::Path,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};

use crate::{
    process::exit_status,
    protocol::{BlockingChannel, FromWorker, Refusal, Start, ToWorker},
    sandbox::{identity, SandboxSettings},
    spawn, status, stderr_log,
    zygote_handle::Zygote,
};

/// What a worker reported about a library.
#[derive(Debug, Clone)]
pub struct Probed {
    /// The manifest (JSON text), or the plugin's error.
    pub manifest: Result<String, String>,
    /// The parts of the sandbox this kernel lacks.
    pub missing: Vec<String>,
}

/// Why no manifest came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    /// The worker could not be started.
    #[error("cannot start a plugin worker: {0}")]
    Start(String),
    /// The worker refused (not a plugin, no sandbox).
    #[error(transparent)]
    Refused(Refusal),
    /// The worker died or hung while opening the library.
    #[error("its worker {0} while opening it")]
    Died(String),
}

/// The probing worker's process.
enum Child {
    /// Started by `exec`.
    Spawned(std::process::Child),
    /// Forked by the zygote as the server's child, held through a pidfd (so its pid is never
    /// another process's before it is reaped here).
    Forked(OwnedFd),
}

impl Child {
    fn kill(&mut self) {
        match self {
            Child::Spawned(child) => {
                let _ = child.kill();
            }
            Child::Forked(pidfd) => {
                let _ = rustix::process::pidfd_send_signal(&*pidfd, Signal::KILL);
            }
        }
    }

    fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Child::Spawned(child) => child.wait(),
            Child::Forked(pidfd) => {
                rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED)?
                    .map(exit_status)
                    .ok_or_else(|| std::io::Error::other("the worker was not reaped"))
            }
        }
    }
}

/// Starts a worker for `library` with no project (forked by `zygote`, or `program` by
/// `exec` when there is none), and reads the manifest, waiting at most `timeout`.
///
/// # Errors
///
/// [`ProbeError`].
pub fn manifest(
    program: &Path,
    zygote: Option<&Zygote>,
    library: &Path,
    sandbox: SandboxSettings,
    timeout: Duration,
) -> Result<Probed, ProbeError> {
    let start_failed = |e: std::io::Error| ProbeError::Start(e.to_string());
    // No project: a worker of a root server runs as `[plugins].worker_user`, if set.
    let mut sandbox = sandbox;
    sandbox.user = identity::choose(identity::is_root(), None, sandbox.user);
    let (ours, theirs) = UnixStream::pair().map_err(start_failed)?;
    // What the probe writes on stderr (a library's constructor runs in it) reaches the log
    // as a serving worker's does, bounded; the reading thread ends when the probe does.
    let (read, stderr) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| start_failed(e.into()))?;
    let label = library.file_name().map_or_else(
        || library.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    stderr_log::tail_blocking(std::fs::File::from(read), label).map_err(start_failed)?;
    let mut child = match zygote {
        Some(zygote) => {
            let pid = zygote
                .fork_blocking(theirs.as_fd(), stderr.as_fd(), None, None)
                .map_err(start_failed)?;
            drop(stderr);
            let pid = Pid::from_raw(pid).ok_or_else(|| ProbeError::Start("process id 0".into()))?;
            let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())
                .map_err(|e| start_failed(e.into()))?;
            Child::Forked(pidfd)
        }
        None => {
            let (mut command, inherited) =
                spawn::command(program, theirs.as_fd(), None, None).map_err(start_failed)?;
            command.stderr(Stdio::from(stderr));
            let child = command.spawn().map_err(start_failed)?;
            drop(inherited);
            Child::Spawned(child)
        }
    };
    drop(theirs);
    let mut channel = BlockingChannel::new(ours).map_err(start_failed)?;
    let reply = channel
        .stream()
        .set_read_timeout(Some(timeout))
        .and_then(|()| {
            channel.send(&ToWorker::Start(Start {
                library: library.to_owned(),
                project_id: None,
                sandbox,
                lane: false,
            }))
        })
        .and_then(|()| channel.recv::<FromWorker>());
    drop(channel);
    let outcome = match reply {
        Ok(FromWorker::Ready { manifest, missing }) => Ok(Probed { manifest, missing }),
        Ok(FromWorker::Refused(why)) => Err(ProbeError::Refused(why)),
        Ok(FromWorker::Done { .. }) => Err(ProbeError::Died("answered out of turn".to_owned())),
        Err(e)
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut =>
        {
            child.kill();
            Err(ProbeError::Died(format!(
                "did not answer within {timeout:?}"
            )))
        }
        Err(_) => {
            child.kill();
            let status = child.wait().map_err(start_failed)?;
            return Err(ProbeError::Died(status::describe(status)));
        }
    };
    // It exits on its own once the socket closes.
    let _ = child.wait();
    outcome
}
