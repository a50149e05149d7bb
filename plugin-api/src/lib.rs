//! The interface between the `rojos` host and its tool plugins.
//!
//! A tool plugin is a `cdylib` that exports one [`ToolModule`]: two function pointers that
//! carry JSON text. The host asks for the tool's [`Manifest`] (name, description, JSON-schema
//! parameters, interface version) once at load time, then calls the tool with a
//! [`CallContext`] and the model's arguments, both as JSON. Everything that may change later
//! changes inside that JSON, never in the root module's layout (see [`module`]).
//!
//! # Writing a tool
//!
//! Implement [`Tool`] and export it with [`export_tool!`]. The macro wraps every exported
//! function in `catch_unwind`, so a panic in the tool becomes an error result instead of
//! taking the host down. File access goes through `rojos-fs-guard`, which confines every path
//! to the project root (never open paths with `std::fs` in a tool).
//!
//! ```
//! use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! /// Says hello to whoever the model names.
//! pub struct Greet;
//!
//! #[derive(Deserialize)]
//! struct Args {
//!     name: String,
//! }
//!
//! impl Tool for Greet {
//!     fn spec() -> ToolSpec {
//!         ToolSpec::new("greet", "Greet someone by name.").parameters(json!({
//!             "type": "object",
//!             "properties": { "name": { "type": "string", "description": "who to greet" } },
//!             "required": ["name"],
//!             "additionalProperties": false
//!         }))
//!     }
//!
//!     fn call(_ctx: &CallContext, args: &str) -> Result<String, ToolError> {
//!         let args: Args = rojos_plugin_api::parse_args(args)?;
//!         Ok(json!({ "greeting": format!("hello, {}", args.name) }).to_string())
//!     }
//! }
//!
//! export_tool!(Greet);
//! # fn main() {}
//! ```
//!
//! Build it as a `cdylib` (`crate-type = ["cdylib"]`, keep the default `panic = "unwind"`,
//! and depend on `abi_stable = "0.11"` besides this crate, `serde` and `serde_json`),
//! drop the library into the host's plugin folder or list it in `[plugins].load`, and enable
//! the tool for a rojo in `rojos.toml`.

#![forbid(unsafe_code)]

pub mod export;
pub mod module;
pub mod types;

pub use module::{ToolModule, ToolModuleRef};
pub use types::{parse_args, CallContext, ErrorKind, Limits, Manifest, ToolError, ToolSpec};

/// The tool [`Manifest`]'s `api` number: bumped only if the meaning of the JSON changes in a
/// way old hosts or plugins cannot ignore.
pub const JSON_API: u32 = 1;

/// Re-exported for the [`export_tool!`] expansion. The plugin crate must also list
/// `abi_stable` in its own `Cargo.toml`: abi_stable's export attribute names `::abi_stable`.
#[doc(hidden)]
pub use abi_stable;
#[doc(hidden)]
pub use serde_json;

/// A tool, as its author writes it. [`export_tool!`] turns it into the exported module.
pub trait Tool {
    /// The tool's name, description, parameters and flags.
    fn spec() -> ToolSpec;

    /// Runs the tool on the model's arguments (JSON text, already checked against the
    /// parameters schema by the host) and returns the text the model is given.
    ///
    /// # Errors
    ///
    /// A [`ToolError`] whose message the model reads: say what went wrong and, where it
    /// helps, what to do instead.
    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError>;
}
