//! Tool plugins: loading a library into a [`Tool`], and running one call of it.
//!
//! `trust` opens a plugin file only if nobody but the server's user or root could have
//! written it; `loader` turns that file into a loaded library (or a [`LoadError`] naming the
//! file and the reason); `invoke` runs one call off the async runtime under a deadline and a
//! per-plugin concurrency cap, on `args` (the model's arguments, parsed once and checked
//! against the tool's schema), and gives an `outcome` (the result, or a typed failure whose
//! message becomes the model's `error: …` text). The set of tools the server offers is the [`crate::registry`].

mod args;
mod copies;
mod elf;
mod invoke;
mod loader;
mod outcome;
mod trust;
mod watch;

pub use args::ToolArgs;
pub use invoke::{invoke, CallRequest};
pub use loader::{Library, LoadError, LoadFailure, Loader, Tool, MAX_PLUGIN_BYTES};
pub use outcome::{model_text, FailureKind, ToolFailure, ToolOutcome};
pub use trust::Distrust;
pub use watch::{check_folder, DropIn, WatchGuard};
