//! The worker process: `rojos plugin-worker`, started by the server with the socket as
//! descriptor [`SOCKET_FD`] (and a project root as [`ROOT_FD`]). It reads its start message,
//! puts itself in the sandbox, opens the library (so the library's constructors already run
//! confined), reports the manifest, then serves calls until the server closes the socket, when
//! it exits at once, whatever its threads are doing.
//!
//! No async runtime: the thread that reads a call runs it and writes its answer itself, so a
//! call costs no hand-off between threads inside the worker. The threads not running a call
//! wait for the socket to become readable, each on its own epoll set that holds the socket
//! with `EPOLLEXCLUSIVE`: a frame wakes one of them, not all, and the one running a call
//! never has to wake another to read in its place. So calls on one project still run side by
//! side, and a cancel or the socket's close is seen at once, by a thread that was already
//! waiting. A thread is started only when every thread is busy with a call. One more thread
//! serves the worker's lane (`crate::lane`), one call at a time.

use std::{
    collections::HashSet,
    os::{
        fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::net::UnixStream,
    },
    process::ExitCode,
    sync::{Arc, Mutex},
};

use abi_stable::std_types::{RStr, RString};
use rojos_plugin_api::{CallContext, Limits, ToolModuleRef};

use crate::{
    answer, lock, module,
    protocol::{
        BlockingChannel, FrameReader, FrameWriter, FromWorker, Refusal, ToWorker, LANE_FD, ROOT_FD,
        SOCKET_FD,
    },
    sandbox::{self, Reach, Rule},
};

/// Runs the worker; exits when the server closes the socket (or at a protocol error).
pub fn main() -> ExitCode {
    ExitCode::from(u8::try_from(serve_inherited()).unwrap_or(2))
}

/// The worker on its inherited descriptors, started by `exec` or forked by the zygote
/// (`crate::zygote`): returns an exit status only when it cannot use its socket; otherwise it
/// exits the process itself.
pub(crate) fn serve_inherited() -> i32 {
    // SAFETY: the server (or the zygote) starts this process with its end of the socketpair
    // as SOCKET_FD, and nothing else in this process has taken that descriptor; a missing one
    // fails below.
    let socket = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    if rustix::io::fcntl_getfd(socket.as_fd()).is_err() {
        std::mem::forget(socket);
        eprintln!("rojos plugin-worker is started by the server, not by hand");
        return 2;
    }
    let stream = UnixStream::from(socket);
    let channel = match stream
        .set_nonblocking(false)
        .and_then(|()| BlockingChannel::new(stream))
    {
        Ok(channel) => channel,
        Err(e) => {
            eprintln!("plugin worker: cannot use its socket: {e}");
            return 2;
        }
    };
    let code = start(channel);
    // Plugin threads may still run: they end with the process, not before.
    std::process::exit(code)
}

/// Reads the start, sandboxes, opens the library, reports; then serves calls (and never
/// returns once serving: the process exits when the socket closes).
fn start(mut channel: BlockingChannel) -> i32 {
    let start = match channel.recv::<ToWorker>() {
        Ok(ToWorker::Start(start)) => start,
        Ok(other) => {
            refuse(&mut channel, Refusal::Protocol(format!("{other:?}")));
            return 2;
        }
        Err(e) if e.kind() == std::io::ErrorKind::Other => {
            refuse(&mut channel, Refusal::Protocol(e.to_string()));
            return 2;
        }
        Err(_) => return 2,
    };
    let root = start.project_id.as_ref().map(|_| {
        // SAFETY: a worker started for a project inherits the project root as ROOT_FD.
        unsafe { OwnedFd::from_raw_fd(ROOT_FD) }
    });
    let lane = start.lane.then(|| {
        // SAFETY: a worker started with a lane inherits its end as LANE_FD.
        UnixStream::from(unsafe { OwnedFd::from_raw_fd(LANE_FD) })
    });
    // Opened before the sandbox, while the worker may still be root: a worker that becomes
    // its project's user may not reach the server's private copy by its path, so it opens
    // the library through this descriptor (docs/security.md).
    let library_file = std::fs::File::open(&start.library).ok();
    let reach = Reach {
        library: &start.library,
        library_fd: library_file.as_ref().map(AsFd::as_fd),
        root: root.as_ref().map(AsFd::as_fd),
    };
    let missing = match sandbox::apply(&Rule::ALL, &start.sandbox, reach) {
        Ok(missing) => missing,
        Err(why) => {
            refuse(&mut channel, Refusal::Sandbox(why));
            return 3;
        }
    };
    let by_descriptor = library_file
        .as_ref()
        .filter(|_| start.sandbox.user.is_some())
        .map(|file| std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())));
    let module = match module::open(by_descriptor.as_deref().unwrap_or(&start.library)) {
        Ok(module) => module,
        Err(e) => {
            refuse(&mut channel, Refusal::Module(e));
            return 4;
        }
    };
    let manifest = module.manifest()()
        .into_result()
        .map(RString::into_string)
        .map_err(RString::into_string);
    if channel
        .send(&FromWorker::Ready { manifest, missing })
        .is_err()
    {
        return 0;
    }
    let watched = match channel.stream().try_clone() {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("plugin worker: cannot watch its socket: {e}");
            return 2;
        }
    };
    let (reader, writer) = channel.split();
    let serving = Arc::new(Serving {
        watched,
        reader: Mutex::new(reader),
        writer: Mutex::new(writer),
        module,
        project_id: start.project_id.clone().unwrap_or_default(),
        root_fd: if root.is_some() { ROOT_FD } else { -1 },
        calls: Mutex::new(Calls {
            threads: 1,
            ..Calls::default()
        }),
    });
    if let Some(lane) = lane {
        serve_lane(&serving, lane);
    }
    // `root` stays open (the plugins reach it as ROOT_FD): serving never returns.
    serve(&serving)
}

/// Starts the thread that serves the lane: each call it reads, it runs and answers there.
/// It ends when the server closes the lane (or sends what is not a call).
fn serve_lane(serving: &Arc<Serving>, lane: UnixStream) {
    let serving = Arc::clone(serving);
    let started = std::thread::Builder::new()
        .name("lane".to_owned())
        .spawn(move || {
            let Ok(mut lane) = BlockingChannel::new(lane) else {
                return;
            };
            while let Ok(ToWorker::Call {
                id,
                limits,
                create_only,
                args,
            }) = lane.recv::<ToWorker>()
            {
                let result = answer::fit(run(&serving, limits, create_only, &args));
                if lane.send(&FromWorker::Done { id, result }).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = started {
        eprintln!("plugin worker: no thread for its lane ({e}); its calls come on its socket");
    }
}

fn refuse(channel: &mut BlockingChannel, why: Refusal) {
    let _ = channel.send(&FromWorker::Refused(why));
}

/// What the serving threads share.
struct Serving {
    /// The socket, as the waiting threads' epoll sets watch it.
    watched: UnixStream,
    /// The socket's reading half: held while one frame is read.
    reader: Mutex<FrameReader>,
    /// The writing half: one answer at a time, each written whole.
    writer: Mutex<FrameWriter>,
    module: ToolModuleRef,
    project_id: String,
    root_fd: RawFd,
    calls: Mutex<Calls>,
}

/// The calls running now.
#[derive(Default)]
struct Calls {
    running: HashSet<u64>,
    /// Running calls whose answer the server no longer waits for.
    cancelled: HashSet<u64>,
    /// Serving threads, and how many of them are running a call.
    threads: usize,
    busy: usize,
}

/// One serving thread: reads a frame, runs it if it is a call, answers; again. Exits the
/// process when the socket closes or a frame is not understood.
fn serve(serving: &Arc<Serving>) -> ! {
    let mut waiting = Waiting::new(&serving.watched)
        .inspect_err(|e| {
            eprintln!("plugin worker: no epoll set ({e}); this thread waits in the socket instead");
        })
        .ok();
    loop {
        if let Some(Err(e)) = waiting.as_ref().map(Waiting::until_readable) {
            eprintln!("plugin worker: epoll failed ({e}); this thread waits in the socket instead");
            waiting = None;
        }
        let message = match &waiting {
            Some(_) => match lock(&serving.reader).recv_waiting::<ToWorker>().transpose() {
                Some(message) => message,
                // Another thread took what woke this one.
                None => continue,
            },
            None => lock(&serving.reader).recv::<ToWorker>(),
        };
        match message {
            Ok(ToWorker::Call {
                id,
                limits,
                create_only,
                args,
            }) => {
                let spare_needed = {
                    let mut calls = lock(&serving.calls);
                    calls.running.insert(id);
                    calls.busy += 1;
                    calls.busy == calls.threads
                };
                if spare_needed {
                    start_spare(serving);
                }
                let result = answer::fit(run(serving, limits, create_only, &args));
                let wanted = {
                    let mut calls = lock(&serving.calls);
                    calls.running.remove(&id);
                    calls.busy -= 1;
                    !calls.cancelled.remove(&id)
                };
                if wanted
                    && lock(&serving.writer)
                        .send(&FromWorker::Done { id, result })
                        .is_err()
                {
                    std::process::exit(0);
                }
            }
            Ok(ToWorker::Cancel { id }) => {
                let mut calls = lock(&serving.calls);
                if calls.running.contains(&id) {
                    calls.cancelled.insert(id);
                }
            }
            // The server closed the socket (or broke the protocol): nothing more to do.
            _ => std::process::exit(0),
        }
    }
}

/// One thread's epoll set, holding the socket exclusively: of the threads waiting in theirs,
/// one is woken when a frame comes (or the socket closes).
struct Waiting(OwnedFd);

impl Waiting {
    fn new(socket: &UnixStream) -> std::io::Result<Waiting> {
        use rustix::event::epoll;
        let set = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &set,
            socket,
            epoll::EventData::new_u64(0),
            epoll::EventFlags::IN | epoll::EventFlags::EXCLUSIVE,
        )?;
        Ok(Waiting(set))
    }

    /// Returns when the socket has something to read or has closed.
    fn until_readable(&self) -> std::io::Result<()> {
        use rustix::event::epoll;
        let mut events = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }];
        loop {
            match epoll::wait(&self.0, &mut events[..], None) {
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
                Ok(_) => return Ok(()),
            }
        }
    }
}

/// Starts another serving thread, to read while every other thread runs a call. Without
/// one (the thread limit is reached), the next call waits for a running one to finish.
fn start_spare(serving: &Arc<Serving>) {
    lock(&serving.calls).threads += 1;
    let spare = Arc::clone(serving);
    let started = std::thread::Builder::new()
        .name("call".to_owned())
        .spawn(move || serve(&spare));
    if let Err(e) = started {
        lock(&serving.calls).threads -= 1;
        eprintln!("plugin worker: no thread for another call ({e}); calls wait their turn");
    }
}

/// The plugin's `call`.
fn run(
    serving: &Serving,
    limits: Limits,
    create_only: Vec<String>,
    args: &str,
) -> Result<String, String> {
    let context = CallContext {
        project_id: serving.project_id.clone(),
        root_fd: serving.root_fd,
        limits,
        create_only,
    };
    let context = serde_json::to_string(&context).expect("a CallContext always serialises");
    serving.module.call()(RStr::from_str(&context), RStr::from_str(args))
        .into_result()
        .map(RString::into_string)
        .map_err(RString::into_string)
}
