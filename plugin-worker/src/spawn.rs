//! Starting a worker: the server's own binary (`rojos plugin-worker`) with an empty
//! environment, the socket as descriptor [`SOCKET_FD`], the project root, if any, as
//! [`ROOT_FD`] and its lane, if any, as [`LANE_FD`]; nothing else is inherited (every other
//! descriptor of the server is close-on-exec).

use std::{
    os::{
        fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd},
        unix::process::CommandExt,
    },
    path::Path,
    process::{Command, Stdio},
};

use crate::protocol::{LANE_FD, ROOT_FD, SOCKET_FD};

/// The subcommand that makes the server's binary a worker.
pub const SUBCOMMAND: &str = "plugin-worker";

/// A command that starts `program` as a worker on `socket` (the worker's end), `root` and
/// `lane`. The descriptors are duplicated (close-on-exec) and moved into place in the child;
/// the returned guard keeps the duplicates open until the child has started.
///
/// # Errors
///
/// The descriptors could not be duplicated.
pub fn command(
    program: &Path,
    socket: BorrowedFd<'_>,
    root: Option<BorrowedFd<'_>>,
    lane: Option<BorrowedFd<'_>>,
) -> std::io::Result<(Command, Inherited)> {
    command_as(program, SUBCOMMAND, socket, root, lane)
}

/// [`command`] for another of the binary's hidden subcommands (the zygote's).
///
/// # Errors
///
/// The descriptors could not be duplicated.
pub fn command_as(
    program: &Path,
    subcommand: &str,
    socket: BorrowedFd<'_>,
    root: Option<BorrowedFd<'_>>,
    lane: Option<BorrowedFd<'_>>,
) -> std::io::Result<(Command, Inherited)> {
    // Above the targets, so moving one into place never overwrites another.
    let mut moved = Vec::with_capacity(3);
    for (fd, target) in [(Some(socket), SOCKET_FD), (root, ROOT_FD), (lane, LANE_FD)] {
        if let Some(fd) = fd {
            moved.push((rustix::io::fcntl_dupfd_cloexec(fd, 10)?, target));
        }
    }
    let pairs: Vec<(RawFd, RawFd)> = moved
        .iter()
        .map(|(fd, target)| (fd.as_raw_fd(), *target))
        .collect();
    let mut command = Command::new(program);
    command
        .arg(subcommand)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only `dup2`, which is async-signal-safe, runs between fork and exec; `dup2`
    // clears close-on-exec on the new descriptor, and the sources (close-on-exec) close at exec.
    unsafe {
        command.pre_exec(move || {
            for (source, target) in &pairs {
                if libc::dup2(*source, *target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok((
        command,
        Inherited {
            _fds: moved.into_iter().map(|(fd, _)| fd).collect(),
        },
    ))
}

/// The duplicated descriptors a started child inherits; drop it once the child has started.
#[derive(Debug)]
pub struct Inherited {
    _fds: Vec<OwnedFd>,
}
