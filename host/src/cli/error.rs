//! [`CliError`]: why a command failed, as one line for the person who ran it, naming the
//! file or the name at fault and what to do. The binary prints it with its cause chain, so no
//! message here repeats its cause.

use std::path::PathBuf;

use crate::{
    config::ConfigError,
    live::{ProviderError, UnknownRojo},
    state::StartError,
    storage::ProjectIdError,
};

use super::init::InitError;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// There is no file at the config path.
    #[error("no config file at {}: create one with `rojos init`, or pass --config PATH", path.display())]
    NoConfig {
        /// The path looked at, absolute.
        path: PathBuf,
    },
    /// The config file exists but cannot be read.
    #[error("cannot read config file {}: {error}; fix that, create another with `rojos init -o PATH`, or pass --config PATH", path.display())]
    UnreadableConfig {
        /// The path, absolute.
        path: PathBuf,
        /// Why (in the message, not a cause: said once).
        error: std::io::Error,
    },
    /// The config file is invalid.
    #[error(transparent)]
    Config(ConfigError),
    /// The server's state could not be built (storage, plugins, a rojo's tools).
    #[error(transparent)]
    Start(#[from] StartError),
    /// `--project` is not a valid project id.
    #[error(transparent)]
    InvalidProject(#[from] ProjectIdError),
    /// `--rojo` names no configured rojo.
    #[error(transparent)]
    UnknownRojo(#[from] UnknownRojo),
    /// `rojos probe NAME` names no configured provider.
    #[error("unknown provider {name:?} (the config has: {known})")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The configured providers.
        known: String,
    },
    /// The provider's API key variable is not set; the sentence says which and what to do.
    #[error("{advice}")]
    MissingKey {
        /// The provider's name in the config.
        name: String,
        /// What to tell the user (`providers::advice::missing_key`).
        advice: String,
    },
    /// The provider names no model, and its list gave none to use (the fix says why).
    #[error("providers.{name}: {fix}")]
    NoModel {
        /// The provider's name in the config.
        name: String,
        /// Why, and what to do (the background check's sentence).
        fix: String,
    },
    /// The provider's client cannot be built.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The probe ran and a check failed (the report above says which).
    #[error("provider {name:?} failed the probe")]
    ProbeFailed {
        /// The provider's name in the config.
        name: String,
    },
    /// `rojos init` wrote nothing, or wrote a file that does not load.
    #[error(transparent)]
    Init(#[from] InitError),
    /// The async runtime for the probe could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The output could not be produced.
    #[error("cannot print the tools: {0}")]
    Json(#[from] serde_json::Error),
}
