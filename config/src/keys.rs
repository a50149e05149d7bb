//! Why a configuration is refused ([`ConfigError`], naming the key at fault) and the checks
//! every section's parser shares: a number with a floor, a duration in seconds.

use std::{path::PathBuf, time::Duration};

/// Why a configuration was refused. Messages name the key (`rojos.default.provider: ...`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config '{path}': {error}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why (in the message and not a `source`, so a printed cause chain says it once).
        error: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a value of the wrong type.
    #[error("config '{path}': {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The TOML parser's message, with line, column and the source line, secrets hidden
        /// (see docs/configuration.md, "Secrets in error messages").
        message: String,
    },
    /// A value is well-formed but wrong.
    #[error("{key}: {message}")]
    Invalid {
        /// The key, as a dotted path.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
}

pub(super) fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

/// Where the server reads its environment variables from; tests pass their own.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A number key: absent gives `default`; below `min` it is refused, naming the key.
pub(super) fn at_least<T: PartialOrd + Copy + std::fmt::Display>(
    key: &str,
    value: Option<T>,
    default: T,
    min: T,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if value < min {
        return Err(invalid(key, format!("must be at least {min}")));
    }
    Ok(value)
}

/// A duration key in seconds: absent gives `default`; otherwise within `(0, max]`.
pub(super) fn seconds_key(
    key: &str,
    value: Option<f64>,
    default: Duration,
    max: f64,
) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(s) if s > 0.0 && s <= max => Ok(Duration::from_secs_f64(s)),
        Some(_) => Err(invalid(key, format!("must be between 0 and {max} seconds"))),
    }
}
