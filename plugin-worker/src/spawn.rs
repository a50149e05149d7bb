//! Starting a worker: the server's own binary (`rojos plugin-worker`) with an empty
//! environment, the socket as descriptor [`SOCKET_FD`] and the project root, if any, as
//! [`ROOT_FD`]; nothing else is inherited (every other descriptor of the server is
//! close-on-exec).

use std::{
    os::{
        fd::{AsRawFd, BorrowedFd, OwnedFd},
        unix::process::CommandExt,
    },
    path::Path,
    process::{Command, Stdio},
};

use crate::protocol::{ROOT_FD, SOCKET_FD};

/// The subcommand that makes the server's binary a worker.
pub const SUBCOMMAND: &str = "plugin-worker";

/// A command that starts `program` as a worker on `socket` (the worker's end) and `root`.
/// The descriptors are duplicated (close-on-exec) and moved into place in the child; the
/// returned guard keeps the duplicates open until the child has started.
///
/// # Errors
///
/// The descriptors could not be duplicated.
pub fn command(
    program: &Path,
    socket: BorrowedFd<'_>,
    root: Option<BorrowedFd<'_>>,
) -> std::io::Result<(Command, Inherited)> {
    command_as(program, SUBCOMMAND, socket, root)
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
) -> std::io::Result<(Command, Inherited)> {
    // Above the targets, so moving one into place never overwrites the other.
    let socket = rustix::io::fcntl_dupfd_cloexec(socket, 10)?;
    let root = root
        .map(|root| rustix::io::fcntl_dupfd_cloexec(root, 10))
        .transpose()?;
    let socket_raw = socket.as_raw_fd();
    let root_raw = root.as_ref().map(AsRawFd::as_raw_fd);
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
            if libc::dup2(socket_raw, SOCKET_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(root_raw) = root_raw {
                if libc::dup2(root_raw, ROOT_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok((
        command,
        Inherited {
            _fds: (socket, root),
        },
    ))
}

/// The duplicated descriptors a started child inherits; drop it once the child has started.
#[derive(Debug)]
pub struct Inherited {
    _fds: (OwnedFd, Option<OwnedFd>),
}
