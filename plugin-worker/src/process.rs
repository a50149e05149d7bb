//! A worker's process, seen from the server: one it started with `exec`
//! ([`Process::Spawned`], a tokio child) or one the zygote forked as the server's child
//! ([`Process::Forked`], held through a pidfd). Both are waited for and killed the same way,
//! so the supervisor sees the same exit causes whichever way the worker started.

use std::{
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::process::ExitStatusExt,
    },
    process::ExitStatus,
};

use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};
use tokio::io::unix::AsyncFd;

/// A worker's process.
#[derive(Debug)]
pub(crate) enum Process {
    /// Started by `exec` (killed if dropped before it is reaped).
    Spawned(tokio::process::Child),
    /// Forked by the zygote.
    Forked(Forked),
}

impl Process {
    /// Sends SIGKILL, unless it was already reaped.
    pub(crate) fn start_kill(&mut self) -> io::Result<()> {
        match self {
            Process::Spawned(child) => child.start_kill(),
            Process::Forked(forked) => forked.start_kill(),
        }
    }

    /// Waits until it has ended, and reaps it.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Process::Spawned(child) => child.wait().await,
            Process::Forked(forked) => forked.wait().await,
        }
    }
}

/// A child of the server forked by the zygote (`CLONE_PARENT`), held through a pidfd opened
/// while it cannot have been reaped (only the server reaps it), so the pid is never another
/// process's. Killed and reaped when dropped before it was waited for.
#[derive(Debug)]
pub(crate) struct Forked {
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
}

impl Forked {
    /// Takes hold of the server's child `pid`.
    ///
    /// # Errors
    ///
    /// `pid` is not a process, or no pidfd could be opened or registered.
    pub(crate) fn new(pid: i32) -> io::Result<Forked> {
        let pid = Pid::from_raw(pid)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "process id 0"))?;
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
        // SAFETY: an `OwnedFd` stays open, on the same pidfd, until the `AsyncFd` is dropped
        // or gives it back.
        let pidfd =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?;
        Ok(Forked {
            pidfd: Some(pidfd),
            status: None,
        })
    }

    fn start_kill(&mut self) -> io::Result<()> {
        match (&self.pidfd, self.status) {
            (Some(pidfd), None) => {
                rustix::process::pidfd_send_signal(pidfd.get_ref(), Signal::KILL)?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Its status, if it has ended (and reaps it).
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let Some(pidfd) = &self.pidfd else {
            return Err(io::Error::other("the worker's process is gone"));
        };
        let waited = rustix::process::waitid(
            WaitId::PidFd(pidfd.get_ref().as_fd()),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        )?;
        self.status = waited.map(exit_status);
        Ok(self.status)
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            let Some(pidfd) = &self.pidfd else {
                return Err(io::Error::other("the worker's process is gone"));
            };
            // A pidfd is readable once its process has ended.
            let mut ready = pidfd.readable().await?;
            ready.clear_ready();
        }
    }
}

/// The [`ExitStatus`] of a process reaped through `waitid`.
pub(crate) fn exit_status(status: rustix::process::WaitIdStatus) -> ExitStatus {
    let raw = match (status.exit_status(), status.terminating_signal()) {
        (_, Some(signal)) => signal | if status.dumped() { 0x80 } else { 0 },
        (Some(code), None) => (code & 0xff) << 8,
        (None, None) => 0,
    };
    ExitStatus::from_raw(raw)
}

impl Drop for Forked {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = self.start_kill();
        if matches!(self.try_wait(), Ok(Some(_))) {
            return;
        }
        // Killed but not gone yet: reaped by a thread of its own, so no zombie is left.
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        let pidfd = pidfd.into_inner();
        let _ = std::thread::Builder::new()
            .name("reap-worker".to_owned())
            .spawn(move || {
                rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED)
            });
    }
}
