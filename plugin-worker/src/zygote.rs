//! The plugin zygote: `rojos plugin-zygote`, a process started once by the server (empty
//! environment, the control socket as descriptor [`CONTROL_FD`]) that forks a worker per
//! request, as Chromium's zygote does, so a new worker costs a `fork` of a small process
//! instead of an `exec` of the server's binary (docs/plugins.md, "Isolation").
//!
//! The zygote never opens a plugin library: it confines itself
//! ([`crate::sandbox::confine_zygote`]: no capabilities, no network, no `execve`, no `ptrace`,
//! no modules), then waits for requests on a `SOCK_SEQPACKET` socket (one message per
//! request, so no framing): a [`ForkRequest`] with the new worker's descriptors attached
//! (`SCM_RIGHTS`): its end of the worker's socketpair, the write end of a pipe for its
//! stderr, and the project root and its lane when it has them. The zygote forks with
//! `CLONE_PARENT`, so the child is the server's own child (the server waits for it and kills
//! it as it does an `exec`ed worker, through a pidfd: no pid can be reused before the server
//! reaps it), puts the descriptors in place and becomes a worker exactly as an `exec`ed one
//! does ([`crate::worker`]): it reads its start, applies its whole sandbox (Landlock to its
//! own project root), and only then opens the library. The zygote answers [`ForkReply`] with
//! the child's pid.
//!
//! The zygote is single-threaded and holds no lock while it forks, so the child starts with
//! every lock of the C library free. It exits when the server closes the control socket.

use std::{
    io::{IoSlice, IoSliceMut},
    mem::MaybeUninit,
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
    process::ExitCode,
};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendFlags};
use serde::{Deserialize, Serialize};

use crate::{
    protocol::{LANE_FD, ROOT_FD, SOCKET_FD},
    sandbox,
};

/// The subcommand that makes the server's binary a zygote.
pub const SUBCOMMAND: &str = "plugin-zygote";
/// The control socket, as the zygote inherits it (it moves it off this number at once, since
/// each child's own socket takes it).
pub const CONTROL_FD: RawFd = SOCKET_FD;
/// The name (`comm`) of a worker forked by the zygote, as `ps` and `/proc/PID/comm` show it
/// (its command line is the zygote's).
pub const WORKER_NAME: &str = "plugin-worker";
/// The zygote's own name (`comm`).
pub const ZYGOTE_NAME: &str = "plugin-zygote";
/// The largest request or reply: both are a few bytes of JSON.
pub(crate) const MAX_MESSAGE: usize = 1024;

/// Fork a worker: the descriptors attached are its socket, its stderr and, when `root` is
/// set, its project root, and when `lane` is set, its lane, in that order.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct ForkRequest {
    /// Whether a project root is attached.
    pub(crate) root: bool,
    /// Whether a lane is attached.
    #[serde(default)]
    pub(crate) lane: bool,
}

impl ForkRequest {
    /// Where each attached descriptor goes in the worker, in the order they are attached.
    fn targets(self) -> Vec<RawFd> {
        let mut targets = vec![SOCKET_FD, libc::STDERR_FILENO];
        targets.extend(self.root.then_some(ROOT_FD));
        targets.extend(self.lane.then_some(LANE_FD));
        targets
    }
}

/// The zygote's answer to a [`ForkRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ForkReply {
    /// The worker runs, as the server's child.
    Forked {
        /// Its process id.
        pid: i32,
    },
    /// No worker: why.
    Failed(String),
}

/// Runs the zygote until the server closes the control socket.
pub fn main() -> ExitCode {
    // SAFETY: the server starts the zygote with its end of the control socket as CONTROL_FD,
    // and nothing else in this process has taken that descriptor; a missing one fails below.
    let inherited = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    if rustix::io::fcntl_getfd(inherited.as_fd()).is_err() {
        std::mem::forget(inherited);
        eprintln!("rojos plugin-zygote is started by the server, not by hand");
        return ExitCode::from(2);
    }
    let control = match rustix::io::fcntl_dupfd_cloexec(&inherited, 10) {
        Ok(moved) => moved,
        Err(e) => {
            eprintln!("plugin zygote: cannot move its socket: {e}");
            return ExitCode::from(2);
        }
    };
    drop(inherited);
    let _ = rustix::thread::set_name(c"plugin-zygote");
    let missing = sandbox::confine_zygote();
    if !missing.is_empty() {
        // Each child still applies its whole sandbox, and refuses to serve without it when
        // it is required.
        eprintln!(
            "plugin zygote: its own confinement lacks {}",
            missing.join(", ")
        );
    }
    loop {
        match serve_one(&control) {
            Ok(true) => {}
            Ok(false) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("plugin zygote: its control socket failed: {e}");
                return ExitCode::from(2);
            }
        }
    }
}

/// Reads one request and answers it; `Ok(false)` when the server closed the socket.
fn serve_one(control: &OwnedFd) -> std::io::Result<bool> {
    let mut buffer = [0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        control,
        &mut [IoSliceMut::new(&mut buffer)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if received.bytes == 0 && fds.is_empty() {
        return Ok(false);
    }
    let reply = match serde_json::from_slice::<ForkRequest>(&buffer[..received.bytes]) {
        Ok(request) if fds.len() == request.targets().len() => {
            fork_worker(control, &fds, &request.targets())
        }
        Ok(request) => ForkReply::Failed(format!(
            "{} descriptors came with a request for {}",
            fds.len(),
            request.targets().len()
        )),
        Err(e) => ForkReply::Failed(format!("a request not understood: {e}")),
    };
    drop(fds);
    let reply = serde_json::to_vec(&reply).expect("a reply always serialises");
    rustix::net::sendmsg(
        control,
        &[IoSlice::new(&reply)],
        &mut rustix::net::SendAncillaryBuffer::default(),
        SendFlags::NOSIGNAL,
    )?;
    Ok(true)
}

/// Forks a worker on `fds`, each put at its number in `targets`: the child never returns.
fn fork_worker(control: &OwnedFd, fds: &[OwnedFd], targets: &[RawFd]) -> ForkReply {
    // Above every target, so putting one in place never overwrites another.
    let mut high = Vec::with_capacity(fds.len());
    for fd in fds {
        match rustix::io::fcntl_dupfd_cloexec(fd, 10) {
            Ok(moved) => high.push(moved),
            Err(e) => return ForkReply::Failed(format!("cannot move a descriptor: {e}")),
        }
    }
    let sources: Vec<RawFd> = high.iter().map(AsRawFd::as_raw_fd).collect();
    // What the child closes once its descriptors are in place: the copies, the received
    // originals and the control socket (a worker must never reach the zygote).
    let to_close: Vec<RawFd> = sources
        .iter()
        .copied()
        .chain(fds.iter().map(AsRawFd::as_raw_fd))
        .chain([control.as_raw_fd()])
        .filter(|fd| !targets.contains(fd))
        .collect();
    let flags = libc::CLONE_PARENT as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: a fork (no new stack, no shared memory) of a single-threaded process that
    // holds no lock now; the child only moves descriptors and runs the worker, which never
    // returns here.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid == 0 {
        // The child. `dup2` clears close-on-exec on the targets (no `exec` follows anyway).
        for (source, target) in sources.iter().zip(targets.iter().copied()) {
            // SAFETY: plain descriptor calls on descriptors this process owns.
            if unsafe { libc::dup2(*source, target) } < 0 {
                // SAFETY: ends the child at once, as a failed exec would.
                unsafe { libc::_exit(2) };
            }
        }
        for fd in to_close.iter().copied() {
            // SAFETY: as above; the zygote's own copies stay open in the zygote.
            unsafe { libc::close(fd) };
        }
        let _ = rustix::thread::set_name(c"plugin-worker");
        let code = crate::worker::serve_inherited();
        std::process::exit(code);
    }
    drop(high);
    if pid < 0 {
        return ForkReply::Failed(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    match i32::try_from(pid) {
        Ok(pid) => ForkReply::Forked { pid },
        Err(_) => ForkReply::Failed(format!("an impossible process id {pid}")),
    }
}
