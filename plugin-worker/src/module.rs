//! Opening a plugin library through the `abi_stable` root module, shared by the server (for
//! plugins that run in its own process) and the worker (for the ones that run in a worker):
//! one way to load, one set of messages for a library that is not a usable plugin.

use abi_stable::library::{lib_header_from_path, LibraryError, RootModule};
use rojos_plugin_api::ToolModuleRef;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Why a library could not be opened as a tool plugin. Serialisable: a worker reports it to
/// the server over the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ModuleError {
    /// The dynamic loader refused it.
    #[error("not a plugin library: {0}")]
    Dlopen(String),
    /// A library, but not a rojos tool plugin.
    #[error("not a rojos tool plugin: {0}")]
    NotAPlugin(String),
    /// Built against an incompatible plugin-api version.
    #[error("built against plugin-api {found}, host expects {expected}")]
    Version {
        /// The plugin's plugin-api version.
        found: String,
        /// The host's.
        expected: String,
    },
    /// The plugin's interface layout differs from the host's.
    #[error("its interface does not match the host's plugin-api {expected}: {summary}")]
    Layout {
        /// The host's plugin-api version.
        expected: String,
        /// The `Error:`/`Expected:`/`Found:` lines of abi_stable's report.
        summary: String,
    },
}

/// Opens the library at `path` (runs its constructors) and checks its root module.
///
/// # Errors
///
/// [`ModuleError`] saying why it is not a usable plugin.
pub fn open(path: &Path) -> Result<ToolModuleRef, ModuleError> {
    let header = lib_header_from_path(path).map_err(describe)?;
    header.init_root_module::<ToolModuleRef>().map_err(describe)
}

/// The plugin-api version this build speaks.
pub fn host_api_version() -> String {
    ToolModuleRef::VERSION_STRINGS.version.as_str().to_owned()
}

fn describe(e: LibraryError) -> ModuleError {
    match e {
        LibraryError::OpenError { err, .. } => ModuleError::Dlopen(err.to_string()),
        LibraryError::GetSymbolError { .. } => ModuleError::NotAPlugin(
            "it exports no abi_stable root module (was it built with rojos-plugin-api?)".to_owned(),
        ),
        LibraryError::IncompatibleVersionNumber {
            actual_version,
            expected_version,
            ..
        } => ModuleError::Version {
            found: actual_version.to_string(),
            expected: expected_version.to_string(),
        },
        LibraryError::AbiInstability(report) => {
            let report = report.to_string();
            tracing::debug!(%report, "abi_stable layout report");
            layout_failure(&report)
        }
        other => ModuleError::NotAPlugin(other.to_string()),
    }
}

/// Reads the `Error:` / `Expected:` / `Found:` triples of abi_stable's layout report; a
/// different package version of plugin-api is reported as [`ModuleError::Version`].
fn layout_failure(report: &str) -> ModuleError {
    let mut problems = Vec::new();
    let mut lines = report.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if let Some(error) = line.strip_prefix("Error:") {
            let mut value_after = |label: &str| {
                lines.by_ref().find(|l| l.starts_with(label))?;
                lines.next().map(str::to_owned)
            };
            let expected = value_after("Expected:").unwrap_or_default();
            let found = value_after("Found:").unwrap_or_default();
            problems.push((error.trim().to_owned(), expected, found));
        }
    }
    match problems.first() {
        Some((error, expected, found)) if error == "incompatible package versions" => {
            ModuleError::Version {
                found: found.clone(),
                expected: expected.clone(),
            }
        }
        _ => ModuleError::Layout {
            expected: host_api_version(),
            summary: problems
                .iter()
                .take(3)
                .map(|(error, expected, found)| {
                    format!("{error} (expected {expected}, found {found})")
                })
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}
