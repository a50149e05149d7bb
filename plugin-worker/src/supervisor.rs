//! One running worker, seen from the server: [`Worker::start`] spawns it and waits until it
//! is sandboxed and loaded; [`Worker::call`] sends a call and waits for its answer (dropping
//! the future tells the worker the answer is no longer wanted), [`Worker::call_on_lane`]
//! does so from a blocking thread over the worker's lane ([`crate::lane`]); [`Worker::kill`]
//! ends it.
//! A task owns the process and the socket: when the worker dies, whatever the reason, every
//! call still waiting ends with [`Ended`], naming the cause from its exit status (and the last
//! line it wrote on stderr, e.g. Rust's "memory allocation of N bytes failed").

use std::{
    collections::HashMap,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use futures_util::{SinkExt, StreamExt};
use tokio::{
    net::{unix::OwnedReadHalf, UnixStream},
    sync::oneshot,
};
use tokio_util::{
    codec::{Framed, FramedRead, LengthDelimitedCodec},
    sync::CancellationToken,
};

use crate::{
    lane::{Lane, LaneError, LaneStop},
    lock,
    outgoing::Outgoing,
    process::{Forked, Process},
    protocol::{codec, decode, encode, Call, CallFrame, FromWorker, Refusal, Start, ToWorker},
    spawn, status, stderr_log,
    zygote_handle::Zygote,
};

/// How a worker's process is started.
#[derive(Debug, Clone, Copy)]
pub enum Launch<'a> {
    /// `PROGRAM plugin-worker`, by `exec`.
    Exec(&'a Path),
    /// Forked by the zygote.
    Fork(&'a Arc<Zygote>),
}

/// How a worker ended, for the calls it was running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// It died on its own: the cause, e.g. `crashed (SIGSEGV)`.
    Died(String),
    /// The server ended it: a call ran past its deadline, or was cancelled while it ran.
    Stopped,
    /// It was ending when the call came: the call was never sent (start another worker).
    NotSent,
}

/// Why a worker did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The process could not be started.
    #[error("cannot start a plugin worker: {0}")]
    Spawn(String),
    /// It refused to serve.
    #[error(transparent)]
    Refused(Refusal),
    /// It died or went silent before it was ready.
    #[error("its worker {0} while starting")]
    Died(String),
}

/// A call's answer: the plugin's text or error, or how its worker ended first.
pub type Answer = Result<Result<String, String>, Ended>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// A running worker.
#[derive(Debug)]
pub struct Worker {
    outgoing: Arc<Outgoing>,
    pending: Pending,
    next_id: AtomicU64,
    kill: CancellationToken,
    ended: CancellationToken,
    /// Cancelled when the last handle is dropped: the supervising task then closes the socket.
    dropped: CancellationToken,
    last_used: Mutex<Instant>,
    death_counted: std::sync::atomic::AtomicBool,
    /// The server's end of the lane, when no call is on it (`None` while one is, and for a
    /// worker with no project).
    lane: Mutex<Option<Lane>>,
    /// The parts of the sandbox this kernel lacks.
    pub missing: Vec<String>,
}

/// How a call offered to a worker's lane went ([`Worker::call_on_lane`]).
#[derive(Debug)]
pub enum OnLane {
    /// The lane is taken by another call, or the worker has none or is ending: send the call
    /// with [`Worker::call`].
    Unavailable,
    /// Stopped ([`LaneStop`]) before it was sent, or while it ran (its worker was ended).
    Stopped,
    /// The deadline passed first; the worker still runs the call (the caller ends it).
    TimedOut,
    /// The plugin's answer, or how the worker ended.
    Answered(Answer),
}

impl Worker {
    /// Starts a worker as `launch` says, for `start` (with `root` as its project root when
    /// `start.project_id` is set) and waits for it to be ready.
    ///
    /// # Errors
    ///
    /// [`StartError`].
    pub async fn start(
        launch: Launch<'_>,
        mut start: Start,
        root: Option<BorrowedFd<'_>>,
        label: &str,
    ) -> Result<Arc<Worker>, StartError> {
        let spawn_failed = |e: std::io::Error| StartError::Spawn(e.to_string());
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(spawn_failed)?;
        // A worker that serves a project has a lane, for the calls a blocking thread waits for.
        let (lane, lane_theirs) = match root {
            Some(_) => {
                let (lane, theirs) = Lane::pair().map_err(spawn_failed)?;
                (Some(lane), Some(theirs))
            }
            None => (None, None),
        };
        start.lane = lane.is_some();
        let (mut child, stderr) = match launch {
            Launch::Exec(program) => {
                let (command, inherited) = spawn::command(
                    program,
                    theirs.as_fd(),
                    root,
                    lane_theirs.as_ref().map(AsFd::as_fd),
                )
                .map_err(spawn_failed)?;
                let mut command = tokio::process::Command::from(command);
                command.kill_on_drop(true);
                let mut child = command.spawn().map_err(spawn_failed)?;
                drop((inherited, theirs, lane_theirs));
                let stderr = child
                    .stderr
                    .take()
                    .map(|s| stderr_log::tail(s, label.to_owned()));
                (Process::Spawned(child), stderr)
            }
            Launch::Fork(zygote) => {
                let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                    .map_err(|e| spawn_failed(e.into()))?;
                let root = root
                    .map(|root| root.try_clone_to_owned())
                    .transpose()
                    .map_err(spawn_failed)?;
                let pid = zygote
                    .fork(OwnedFd::from(theirs), write, root, lane_theirs)
                    .await
                    .map_err(spawn_failed)?;
                let child = Forked::new(pid).map_err(spawn_failed)?;
                let stderr =
                    tokio::net::unix::pipe::Receiver::from_owned_fd(read).map_err(spawn_failed)?;
                (
                    Process::Forked(child),
                    Some(stderr_log::tail(stderr, label.to_owned())),
                )
            }
        };
        ours.set_nonblocking(true).map_err(spawn_failed)?;
        let mut channel = Framed::new(UnixStream::from_std(ours).map_err(spawn_failed)?, codec());
        let sent = channel.send(encode(&ToWorker::Start(start))).await;
        let ready = match sent {
            Ok(()) => channel.next().await,
            Err(_) => None,
        };
        let missing = match ready.map(|frame| frame.map(|f| decode::<FromWorker>(&f))) {
            Some(Ok(Ok(FromWorker::Ready { missing, .. }))) => missing,
            Some(Ok(Ok(FromWorker::Refused(why)))) => return Err(StartError::Refused(why)),
            _ => {
                let _ = child.start_kill();
                let cause = exit_cause(&mut child, stderr).await;
                return Err(StartError::Died(cause));
            }
        };
        // Nothing was sent after the start, so the write buffer is empty; anything read
        // past the ready frame stays with the reader.
        let parts = channel.into_parts();
        let (read_half, write_half) = parts.io.into_split();
        let mut frames = FramedRead::new(read_half, codec());
        *frames.read_buffer_mut() = parts.read_buf;
        let outgoing = Arc::new(Outgoing::new(write_half));
        let worker = Arc::new(Worker {
            outgoing: Arc::clone(&outgoing),
            pending: Arc::default(),
            next_id: AtomicU64::new(1),
            kill: CancellationToken::new(),
            ended: CancellationToken::new(),
            dropped: CancellationToken::new(),
            last_used: Mutex::new(Instant::now()),
            death_counted: std::sync::atomic::AtomicBool::new(false),
            lane: Mutex::new(lane),
            missing,
        });
        tokio::spawn(supervise(Link {
            child,
            frames,
            outgoing,
            pending: Arc::clone(&worker.pending),
            kill: worker.kill.clone(),
            ended: worker.ended.clone(),
            dropped: worker.dropped.clone(),
            stderr,
        }));
        Ok(worker)
    }

    /// Runs one call; `Err` when the worker ended before answering. The call's frame is
    /// written by the caller itself; only the answer comes through the supervising task.
    pub async fn call(&self, call: Call<'_>) -> Answer {
        *lock(&self.last_used) = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        // Waiting before it is sent: the supervisor fails every waiting call when the
        // worker ends, so none is missed.
        lock(&self.pending).insert(id, tx);
        let mut guard = Unwanted {
            id,
            worker: self,
            armed: true,
        };
        if self
            .outgoing
            .send(&encode(&CallFrame::Call {
                id,
                limits: call.limits,
                create_only: call.create_only,
                args: call.args,
            }))
            .is_err()
        {
            guard.armed = false;
            lock(&self.pending).remove(&id);
            return Err(Ended::NotSent);
        }
        let answer = rx.await;
        guard.armed = false;
        *lock(&self.last_used) = Instant::now();
        answer.unwrap_or_else(|_| Err(Ended::Died("ended".to_owned())))
    }

    /// Runs one call over the worker's lane, on this (blocking) thread, until `deadline`:
    /// [`OnLane::Unavailable`] when the lane is taken or there is none. Never call it on a
    /// thread of the async runtime: it waits in the socket.
    pub fn call_on_lane(&self, call: Call<'_>, deadline: Instant, stop: &LaneStop) -> OnLane {
        let Some(mut lane) = lock(&self.lane).take() else {
            return OnLane::Unavailable;
        };
        if self.has_ended() {
            return OnLane::Unavailable;
        }
        *lock(&self.last_used) = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Waiting like a call on the socket: the worker is busy for the pool's reaper, and
        // when it dies its supervising task tells this call why.
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        if !stop.sending_to(&self.kill) {
            lock(&self.pending).remove(&id);
            *lock(&self.lane) = Some(lane);
            return OnLane::Stopped;
        }
        let answer = lane.call(id, call, deadline);
        stop.done();
        let closed = matches!(answer, Err(LaneError::Closed));
        if !closed || stop.is_stopped() {
            lock(&self.pending).remove(&id);
        }
        match answer {
            Ok(result) => {
                *lock(&self.lane) = Some(lane);
                *lock(&self.last_used) = Instant::now();
                OnLane::Answered(Ok(result))
            }
            // The lane is dropped: the worker does not serve it.
            Err(LaneError::NotSent) => OnLane::Unavailable,
            Err(LaneError::TimedOut) => OnLane::TimedOut,
            Err(LaneError::Closed) if stop.is_stopped() => OnLane::Stopped,
            Err(LaneError::Closed) => self.told_at_death(id, rx, deadline),
            Err(LaneError::Broken(what)) => {
                self.kill();
                OnLane::Answered(Err(Ended::Died(format!(
                    "was ended: it broke the call protocol ({what})"
                ))))
            }
        }
    }

    /// The answer of lane call `id`, whose lane closed: the worker is dying, and its
    /// supervising task tells the call how it ended, as it tells every call waiting. A worker
    /// that closed its lane but lives on is ended at `deadline`.
    fn told_at_death(&self, id: u64, told: oneshot::Receiver<Answer>, deadline: Instant) -> OnLane {
        let told = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .block_on(tokio::time::timeout_at(deadline.into(), told))
                .ok(),
            Err(_) => Some(told.blocking_recv()),
        };
        match told {
            Some(Ok(answer)) => OnLane::Answered(answer),
            Some(Err(_)) => OnLane::Answered(Err(Ended::Died("ended".to_owned()))),
            None => {
                lock(&self.pending).remove(&id);
                self.kill();
                OnLane::Answered(Err(Ended::Died(
                    "was ended: it closed its call channel".to_owned(),
                )))
            }
        }
    }

    /// Ends the worker now (SIGKILL); its waiting calls end with [`Ended::Stopped`].
    pub fn kill(&self) {
        self.kill.cancel();
    }

    /// True the first time it is asked: so a death that failed several calls is counted once.
    pub fn count_death(&self) -> bool {
        !self.death_counted.swap(true, Ordering::Relaxed)
    }

    /// Whether the worker has ended.
    pub fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Whether no call is waiting and none was made for `idle`.
    pub fn is_idle_for(&self, idle: Duration) -> bool {
        lock(&self.pending).is_empty() && lock(&self.last_used).elapsed() >= idle
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.dropped.cancel();
    }
}

/// Tells the worker a call's answer is no longer wanted, when its future is dropped.
struct Unwanted<'a> {
    id: u64,
    worker: &'a Worker,
    armed: bool,
}

impl Drop for Unwanted<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.worker.pending).remove(&self.id);
            let _ = self
                .worker
                .outgoing
                .send(&encode(&ToWorker::Cancel { id: self.id }));
        }
    }
}

/// What the supervising task owns.
struct Link {
    child: Process,
    frames: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    outgoing: Arc<Outgoing>,
    pending: Pending,
    kill: CancellationToken,
    ended: CancellationToken,
    dropped: CancellationToken,
    stderr: Option<tokio::task::JoinHandle<String>>,
}

/// Why the supervising loop stopped.
enum Stop {
    Killed,
    Idle,
    Lost,
}

async fn supervise(link: Link) {
    let Link {
        mut child,
        mut frames,
        outgoing,
        pending,
        kill,
        ended,
        dropped,
        stderr,
    } = link;
    let stop = loop {
        let backlog = outgoing.has_backlog();
        tokio::select! {
            () = kill.cancelled() => break Stop::Killed,
            () = dropped.cancelled() => break Stop::Idle,
            () = outgoing.backlog.notified() => {}
            ready = outgoing.half.writable(), if backlog => {
                if ready.and_then(|()| outgoing.flush_some()).is_err() {
                    break Stop::Lost;
                }
            }
            frame = frames.next() => match frame.map(|f| f.map(|f| decode::<FromWorker>(&f))) {
                Some(Ok(Ok(FromWorker::Done { id, result }))) => {
                    if let Some(waiting) = lock(&pending).remove(&id) {
                        let _ = waiting.send(Ok(result));
                    }
                }
                _ => break Stop::Lost,
            },
        }
    };
    // No new call is sent from now on: the pool starts another worker for the next one.
    outgoing.close();
    ended.cancel();
    drop(frames);
    let ending = match stop {
        Stop::Killed => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            Ended::Stopped
        }
        // The socket closed: the worker exits on its own; a worker that does not is ended.
        Stop::Idle | Stop::Lost => {
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = child.start_kill();
            }
            Ended::Died(exit_cause(&mut child, stderr).await)
        }
    };
    for (_, waiting) in lock(&pending).drain() {
        let _ = waiting.send(Err(ending.clone()));
    }
}

/// The exit status in words, with the last line the worker wrote on stderr.
async fn exit_cause(
    child: &mut Process,
    stderr: Option<tokio::task::JoinHandle<String>>,
) -> String {
    let cause = match child.wait().await {
        Ok(status) => status::describe(status),
        Err(e) => format!("ended ({e})"),
    };
    let last = match stderr {
        Some(task) => tokio::time::timeout(Duration::from_millis(500), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => String::new(),
    };
    match (cause.strip_suffix(')'), last.is_empty()) {
        (Some(open), false) => format!("{open}: {last})"),
        (None, false) => format!("{cause} ({last})"),
        (_, true) => cause,
    }
}
