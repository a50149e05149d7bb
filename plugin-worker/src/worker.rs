//! The worker process: `rojos plugin-worker`, started by the server with the socket as
//! descriptor [`SOCKET_FD`] (and a project root as [`ROOT_FD`]). It reads its start message,
//! puts itself in the sandbox, opens the library (so the library's constructors already run
//! confined), reports the manifest, then runs each call on a thread of its own until the
//! server closes the socket, when it exits at once, whatever its threads are doing.

use std::{
    collections::HashSet,
    os::fd::{AsFd, FromRawFd, OwnedFd},
    process::ExitCode,
};

use abi_stable::std_types::{RStr, RString};
use futures_util::{SinkExt, StreamExt};
use rojos_plugin_api::{CallContext, ToolModuleRef};
use tokio::{net::UnixStream, sync::mpsc};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::{
    module,
    protocol::{codec, decode, encode, FromWorker, Refusal, Start, ToWorker, ROOT_FD, SOCKET_FD},
    sandbox::{self, Reach, Rule},
};

type Channel = Framed<UnixStream, LengthDelimitedCodec>;

/// Runs the worker; returns when the server closes the socket (or at a protocol error).
pub fn main() -> ExitCode {
    // SAFETY: the server starts this process with its end of the socketpair as SOCKET_FD, and
    // nothing else in this process has taken that descriptor; a missing one fails below.
    let socket = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    if rustix::io::fcntl_getfd(socket.as_fd()).is_err() {
        std::mem::forget(socket);
        eprintln!("rojos plugin-worker is started by the server, not by hand");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("plugin worker: no runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(serve(socket));
    // Plugin threads may still run: they end with the process, not before.
    std::process::exit(code)
}

async fn serve(socket: OwnedFd) -> i32 {
    let std = std::os::unix::net::UnixStream::from(socket);
    let stream = match std
        .set_nonblocking(true)
        .and_then(|()| UnixStream::from_std(std))
    {
        Ok(stream) => stream,
        Err(_) => return 2,
    };
    let mut channel = Framed::new(stream, codec());
    let start = match channel.next().await {
        Some(Ok(frame)) => match decode::<ToWorker>(&frame) {
            Ok(ToWorker::Start(start)) => start,
            other => {
                let why = format!("{other:?}");
                refuse(&mut channel, Refusal::Protocol(why)).await;
                return 2;
            }
        },
        _ => return 2,
    };
    let root = start.project_id.as_ref().map(|_| {
        // SAFETY: a worker started for a project inherits the project root as ROOT_FD.
        unsafe { OwnedFd::from_raw_fd(ROOT_FD) }
    });
    let reach = Reach {
        library: &start.library,
        root: root.as_ref().map(AsFd::as_fd),
    };
    let missing = match sandbox::apply(&Rule::ALL, &start.sandbox, reach) {
        Ok(missing) => missing,
        Err(why) => {
            refuse(&mut channel, Refusal::Sandbox(why)).await;
            return 3;
        }
    };
    let module = match module::open(&start.library) {
        Ok(module) => module,
        Err(e) => {
            refuse(&mut channel, Refusal::Module(e)).await;
            return 4;
        }
    };
    let manifest = module.manifest()()
        .into_result()
        .map(RString::into_string)
        .map_err(RString::into_string);
    let ready = FromWorker::Ready { manifest, missing };
    if channel.send(encode(&ready)).await.is_err() {
        return 0;
    }
    run_calls(channel, module, &start).await;
    0
}

async fn refuse(channel: &mut Channel, why: Refusal) {
    let _ = channel.send(encode(&FromWorker::Refused(why))).await;
}

/// Serves calls until the server closes the socket.
async fn run_calls(channel: Channel, module: ToolModuleRef, start: &Start) {
    let (mut sink, mut frames) = channel.split();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u64, Result<String, String>)>();
    let project_id = start.project_id.clone().unwrap_or_default();
    let root_fd = if start.project_id.is_some() {
        ROOT_FD
    } else {
        -1
    };
    let mut running = HashSet::new();
    let mut cancelled = HashSet::new();
    loop {
        tokio::select! {
            frame = frames.next() => {
                let Some(Ok(frame)) = frame else { return };
                match decode::<ToWorker>(&frame) {
                    Ok(ToWorker::Call { id, limits, args }) => {
                        let context = CallContext { project_id: project_id.clone(), root_fd, limits };
                        let context = serde_json::to_string(&context).expect("a CallContext always serialises");
                        let done = done_tx.clone();
                        running.insert(id);
                        tokio::task::spawn_blocking(move || {
                            let result = module.call()(RStr::from_str(&context), RStr::from_str(&args))
                                .into_result()
                                .map(RString::into_string)
                                .map_err(RString::into_string);
                            let _ = done.send((id, result));
                        });
                    }
                    Ok(ToWorker::Cancel { id }) => {
                        if running.contains(&id) {
                            cancelled.insert(id);
                        }
                    }
                    _ => return,
                }
            }
            Some((id, result)) = done_rx.recv() => {
                running.remove(&id);
                if cancelled.remove(&id) {
                    continue;
                }
                if sink.send(encode(&FromWorker::Done { id, result })).await.is_err() {
                    return;
                }
            }
        }
    }
}
