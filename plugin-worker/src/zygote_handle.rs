//! The server's handle on its plugin zygote ([`crate::zygote`]): started on the first
//! request, asked for one worker at a time, started again when it has died. A zygote that
//! dies takes no worker with it (they are the server's children, not its own): only a start
//! under way when it died fails, as a worker that died while starting does, and the next
//! start gets a new zygote.

use std::{
    io::{self, IoSlice},
    mem::MaybeUninit,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::{Path, PathBuf},
    process::{Child, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use rustix::net::{
    AddressFamily, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags,
    SocketType,
};

use crate::{
    lock, spawn, status,
    zygote::{ForkReply, ForkRequest, MAX_MESSAGE, SUBCOMMAND},
};

/// How long the zygote may take to answer a request (a fork takes well under a millisecond;
/// a zygote that does not answer is ended and started again).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The server's zygote: one for every plugin library (it holds no plugin code).
#[derive(Debug)]
pub struct Zygote {
    program: PathBuf,
    running: Mutex<Option<Running>>,
}

/// A started zygote.
#[derive(Debug)]
struct Running {
    child: Child,
    control: OwnedFd,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Zygote {
    /// A zygote of `program` (`PROGRAM plugin-zygote`), started on the first request.
    pub fn new(program: impl Into<PathBuf>) -> Arc<Zygote> {
        Arc::new(Zygote {
            program: program.into(),
            running: Mutex::new(None),
        })
    }

    /// The binary it runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The zygote's process id, if it runs now.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.running).as_ref().map(|r| r.child.id())
    }

    /// Forks a worker on `socket` (its end of the socketpair), `stderr` (where it writes its
    /// messages), `root` (its project root) and `lane` (its end of its lane): the worker's
    /// pid, a child of this process.
    ///
    /// # Errors
    ///
    /// No zygote could be started, or it could not fork.
    pub async fn fork(
        self: &Arc<Self>,
        socket: OwnedFd,
        stderr: OwnedFd,
        root: Option<OwnedFd>,
        lane: Option<OwnedFd>,
    ) -> io::Result<i32> {
        let zygote = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            zygote.fork_blocking(
                socket.as_fd(),
                stderr.as_fd(),
                root.as_ref().map(AsFd::as_fd),
                lane.as_ref().map(AsFd::as_fd),
            )
        })
        .await
        .map_err(io::Error::other)?
    }

    /// [`Zygote::fork`], blocking the calling thread (for the manifest read at load time,
    /// which runs outside the async runtime).
    ///
    /// # Errors
    ///
    /// No zygote could be started, or it could not fork.
    pub fn fork_blocking(
        &self,
        socket: BorrowedFd<'_>,
        stderr: BorrowedFd<'_>,
        root: Option<BorrowedFd<'_>>,
        lane: Option<BorrowedFd<'_>>,
    ) -> io::Result<i32> {
        let mut running = lock(&self.running);
        let mut restarted = false;
        loop {
            if running.is_none() {
                *running = Some(self.start()?);
            }
            let Some(zygote) = running.as_mut() else {
                continue;
            };
            match request(&zygote.control, socket, stderr, root, lane) {
                Ok(ForkReply::Forked { pid }) => return Ok(pid),
                Ok(ForkReply::Failed(why)) => return Err(io::Error::other(why)),
                Err(e) => {
                    // Gone, or not answering: end it, and start another once.
                    let _ = zygote.child.kill();
                    let cause = zygote
                        .child
                        .wait()
                        .map_or_else(|e| format!("ended ({e})"), status::describe);
                    *running = None;
                    if restarted {
                        return Err(io::Error::other(format!(
                            "the plugin zygote {cause} at once when started again ({e})"
                        )));
                    }
                    tracing::warn!("the plugin zygote {cause} ({e}); it is started again");
                    restarted = true;
                }
            }
        }
    }

    fn start(&self) -> io::Result<Running> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let (mut command, inherited) =
            spawn::command_as(&self.program, SUBCOMMAND, theirs.as_fd(), None, None)?;
        // The zygote's own messages (rare: a part of its confinement the kernel lacks) go to
        // the server's stderr; each worker it forks writes to a pipe of its own.
        command.stderr(Stdio::inherit());
        let child = command.spawn()?;
        drop((inherited, theirs));
        rustix::net::sockopt::set_socket_timeout(
            &ours,
            rustix::net::sockopt::Timeout::Recv,
            Some(ANSWER_TIMEOUT),
        )?;
        Ok(Running {
            child,
            control: ours,
        })
    }
}

/// Sends one request with its descriptors and reads the answer.
fn request(
    control: &OwnedFd,
    socket: BorrowedFd<'_>,
    stderr: BorrowedFd<'_>,
    root: Option<BorrowedFd<'_>>,
    lane: Option<BorrowedFd<'_>>,
) -> io::Result<ForkReply> {
    let mut fds = vec![socket, stderr];
    fds.extend(root);
    fds.extend(lane);
    let payload = serde_json::to_vec(&ForkRequest {
        root: root.is_some(),
        lane: lane.is_some(),
    })
    .map_err(io::Error::other)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the descriptors"));
    }
    rustix::net::sendmsg(
        control,
        &[IoSlice::new(&payload)],
        &mut ancillary,
        SendFlags::NOSIGNAL,
    )?;
    let mut answer = [0u8; MAX_MESSAGE];
    let (_, length) = rustix::net::recv(control, &mut answer, RecvFlags::empty())?;
    if length == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    serde_json::from_slice(&answer[..length.min(MAX_MESSAGE)])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
