//! Why a plugin file was not loaded ([`LoadError`], naming the file, and its [`LoadFailure`]),
//! including what a worker reported when the library was opened there.

use std::{path::PathBuf, sync::Arc};

use rojos_plugin_worker::module::ModuleError;

use super::trust::{Distrust, PathIoError};

/// The largest plugin file read. Debug builds of the workspace's plugins are about 20 MB and
/// big release builds with debug info stay under 100 MB; the cap only stops a huge or endless
/// file from filling the disk with its copy.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// Why a plugin file was not loaded, with the file named.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugin '{}': {reason}", path.display())]
pub struct LoadError {
    /// The file as configured or found.
    pub path: PathBuf,
    /// What is wrong with it.
    #[source]
    pub reason: LoadFailure,
}

/// What can be wrong with a plugin file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadFailure {
    /// It could not be read (missing, unreadable).
    #[error("cannot read: {0}")]
    Read(#[source] PathIoError),
    /// Its private copy could not be written (see docs/plugins.md).
    #[error("cannot make a private copy: {0}")]
    Copy(#[source] Arc<std::io::Error>),
    /// Someone other than the server's user or root could have written its code (see
    /// docs/plugins.md): it was never given to the dynamic loader.
    #[error("untrusted: {0}; fix: {fix}", fix = .0.fix())]
    Untrusted(Distrust),
    /// Larger than [`MAX_PLUGIN_BYTES`].
    #[error("larger than the {} MiB a plugin may have", MAX_PLUGIN_BYTES >> 20)]
    TooLarge,
    /// It is not a shared library at all.
    #[error("not a plugin library: {0}")]
    NotALibrary(String),
    /// The dynamic loader refused it.
    #[error("not a plugin library: {0}")]
    Dlopen(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// It is a damaged or partly written library.
    #[error("incomplete or damaged library (still being copied?): {0}")]
    Incomplete(String),
    /// A library, but not a rojos tool plugin, or one built against another plugin-api or
    /// interface layout (found when the library was opened, in this process or a worker).
    #[error(transparent)]
    Module(ModuleError),
    /// The manifest is not the JSON the host expects.
    #[error("manifest is not valid: {0}")]
    InvalidManifest(#[source] Arc<serde_json::Error>),
    /// The manifest's parameters are not a valid JSON schema.
    #[error("parameters are not a valid JSON schema: {0}")]
    InvalidSchema(#[source] Arc<jsonschema::ValidationError<'static>>),
    /// The manifest is unusable (the plugin failed to give it, bad name, not an object
    /// schema, `panic = "abort"` build).
    #[error("{0}")]
    BadManifest(String),
    /// Its worker could not put the sandbox in place (`[plugins].sandbox = "required"`).
    #[error("{0}")]
    Sandbox(String),
    /// Its worker could not be started, or died or hung while opening it.
    #[error("{0}")]
    Worker(String),
    /// Another plugin already provides this tool name.
    #[error("tool name '{name}' is already provided by '{}'", other.display())]
    DuplicateName {
        /// The tool name.
        name: String,
        /// The plugin that keeps it.
        other: PathBuf,
    },
}

impl From<ModuleError> for LoadFailure {
    fn from(e: ModuleError) -> LoadFailure {
        match e {
            ModuleError::Dlopen(why) => LoadFailure::Dlopen(Arc::new(std::io::Error::other(why))),
            other => LoadFailure::Module(other),
        }
    }
}
