//! The OpenAI function definition of a plugin's tool, computed from its manifest once per
//! loaded library (not per model turn).

use rojos_plugin_api::Manifest;
use serde_json::{json, Value};

/// How a destructive tool's description starts.
pub const DESTRUCTIVE_MARK: &str = "[destructive: changes cannot be undone]";

/// The OpenAI function definition of a tool, with a parameters schema every provider accepts.
/// A destructive tool's description starts with [`DESTRUCTIVE_MARK`], for the model and for
/// clients (the OpenAI format has no field for it).
pub fn definition(manifest: &Manifest) -> Value {
    let spec = &manifest.spec;
    let description = if spec.destructive {
        format!("{DESTRUCTIVE_MARK} {}", spec.description)
    } else {
        spec.description.clone()
    };
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": description,
            "parameters": rojos_llm::sanitize_schema(&spec.parameters),
        }
    })
}
