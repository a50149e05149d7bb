//! [`InitError`]: why `rojos init` wrote nothing, or wrote a file that does not load.

use std::path::PathBuf;

use rojos_llm::ProviderKind;

use crate::{config::ConfigError, names, state::StartError};

/// Why `rojos init` wrote nothing, or wrote a file that does not load.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The file exists and `--force` was not given.
    #[error("{} already exists: pass --force to overwrite it, or -o PATH to write another file", .0.display())]
    Exists(PathBuf),
    /// No `--kind`, and no terminal to ask on.
    #[error("no --kind given and no terminal to ask on: pass --kind KIND ({})", names::listed(ProviderKind::ALL.map(ProviderKind::name)))]
    NoKind,
    /// The running binary's path is unknown.
    #[error("cannot find the folder of the rojos binary ({0}): pass --plugins DIR")]
    NoBinaryFolder(std::io::Error),
    /// The built-in tool plugins are not in the folder looked at.
    #[error("no built tool plugins in {} (missing {missing}): build them with `cargo build --release --workspace`, or pass --plugins DIR", dir.display())]
    NoPlugins {
        /// The folder looked at.
        dir: PathBuf,
        /// The missing library files.
        missing: String,
    },
    /// A path TOML cannot hold.
    #[error("{}: not valid UTF-8, so a config file cannot name it", .0.display())]
    NotUtf8(PathBuf),
    /// The answers make a config that would not load.
    #[error("{0} (nothing written)")]
    Invalid(ConfigError),
    /// The file or its folder cannot be written.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        /// The config file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The written file does not load (a plugin, the storage folder).
    #[error("wrote {}, but it does not load: {error}", path.display())]
    Check {
        /// The config file.
        path: PathBuf,
        /// Why (boxed: a start error is large, and this one is rare).
        error: Box<StartError>,
    },
    /// The input ended before every question was answered.
    #[error("cancelled: the input ended before every question was answered (nothing written)")]
    Cancelled,
    /// The terminal cannot be read or written.
    #[error("cannot ask on the terminal: {0}")]
    Ask(std::io::Error),
}
