//! Tool plugins in sandboxed worker processes (docs/plugins.md, "Isolation").
//!
//! A plugin that runs in a worker is never opened by the server: a child process (forked by
//! the server's plugin zygote, [`zygote`], or started from the server's own binary as `rojos
//! plugin-worker`) puts itself in a sandbox, opens the
//! library through the same `abi_stable` root module the server uses ([`module`]), and runs
//! the calls the server sends it over a Unix socketpair ([`protocol`]). A worker that crashes,
//! exits, runs out of memory or is ended at a call's deadline fails only its own calls.
//!
//! # Layout
//!
//! - [`protocol`]: the messages and their framing.
//! - [`module`]: opening a library as a tool plugin (shared with in-process loading).
//! - [`sandbox`]: what a worker confines itself to before it opens the library.
//! - [`worker`]: the worker process's main loop; [`answer`]: a call's result, cut to fit in
//!   a frame.
//! - [`spawn`], [`supervisor`], [`pool`], [`probe`]: the server's side — starting a worker,
//!   talking to one and noticing its death, one worker per project and library, and reading
//!   a manifest at load time; `outgoing`: the socket's writing half the callers share;
//!   [`lane`]: a worker's second socket, for a call whose server thread waits for the
//!   answer itself.
//! - [`zygote`], [`zygote_handle`]: the fork server that starts workers without an `exec`
//!   (the zygote process, and the server's handle on it); `process` is a worker's process
//!   either way.
//! - [`status`]: an exit status in words; [`stderr_log`]: a worker's stderr in the server's
//!   log, bounded.

pub mod answer;
pub mod lane;
pub mod module;
mod outgoing;
pub mod pool;
pub mod probe;
mod process;
pub mod protocol;
pub mod record;
pub mod sandbox;
pub mod spawn;
pub mod status;
pub mod stderr_log;
pub mod supervisor;
pub mod worker;
pub mod zygote;
pub mod zygote_handle;

pub use lane::LaneStop;
pub use pool::{LaneCall, Outcome, PoolSettings, ProjectKey, QuarantineRule, WorkerPool};
pub use protocol::Call;
pub use sandbox::SandboxSettings;
pub use supervisor::Ended;
pub use zygote_handle::Zygote;

/// Locks `mutex`, even one a thread panicked while holding: what each mutex here guards is
/// left whole between statements, so it stays usable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
