//! Tool plugins, the server's side: loading a library into a [`Tool`], and running one call
//! of it.
//!
//! `trust` opens a plugin file only if nobody but the server's user or root could have
//! written it; `loader` turns that file into a loaded library (or a [`LoadError`] naming the
//! file and the reason, `load_error`), through a private copy (`copies`) checked as a whole
//! ELF file (`elf`); `invoke` runs one call off the async runtime under a deadline and a
//! per-plugin concurrency cap, on `args` (the model's arguments, parsed once and checked
//! against the tool's schema), and gives an `outcome` (the result, or a typed failure whose
//! message becomes the model's `error: …` text); `definition` is a tool's OpenAI function
//! definition, computed once per library; `dropin` keeps the drop-in folder's tools loaded
//! (on the shared folder watcher, `rojos-watcher`); `call` is a call's shape and the failures both
//! paths report; `start` settles whether a call's plugin starts at all, between its thread
//! (waiting for the project's lock) and a caller that gives up; `isolation` runs a call in the plugin's sandboxed
//! worker process instead (the `rojos-plugin-worker` crate) when the plugin is isolated;
//! `recording` makes the checkpoints' recordings (`rojos-checkpoints`) the work around a
//! changing call.
//!
//! This crate sits below the host's registry (`rojos::registry`), which consumes the tools it
//! produces; nothing here names the registry (the drop-in folder hands its tools to a
//! callback), the config file (the host hands it plain values such as [`WorkerSettings`]) or
//! the HTTP API. The host re-exports it as `rojos::plugins`.

#![forbid(unsafe_code)]

mod args;
mod call;
mod copies;
mod definition;
mod dropin;
mod elf;
mod invoke;
mod isolation;
mod load_error;
mod loader;
mod outcome;
mod recording;
mod start;
mod trust;

pub use args::{schema_problems, ToolArgs};
pub use call::{AroundCall, CallRequest};
pub use definition::{definition, DESTRUCTIVE_MARK};
pub use dropin::{check_folder, DropIn, FolderError, Publish};
pub use invoke::{check_call_args, invoke, invoke_around};
pub use isolation::{Isolation, WorkerSettings, WorkerStart};
pub use loader::{Library, LoadError, LoadFailure, Loader, Tool, MAX_PLUGIN_BYTES};
pub use outcome::{model_text, FailureKind, ToolFailure, ToolOutcome};
pub use rojos_plugin_worker::module::ModuleError;
pub use trust::Distrust;
pub use trust::PathIoError;
