//! The tool registry: an immutable snapshot of the loaded tools by name, behind an atomically
//! swapped `Arc`. Each model turn takes one snapshot, so a reload never changes the tools
//! under a running turn. Also builds the OpenAI `tools` array a rojo offers its model.

use std::{collections::BTreeMap, sync::Arc};

use arc_swap::ArcSwap;
use rojos_plugin_api::Manifest;
use serde_json::{json, Value};

use crate::{
    config::ToolSelection,
    plugins::{LoadError, LoadFailure, Tool},
};

/// One immutable set of tools.
#[derive(Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<Tool>>,
}

impl Registry {
    /// Builds a registry from tools in priority order: the first tool of a name wins, each
    /// later one is returned as a [`LoadFailure::DuplicateName`] error.
    pub fn build(tools: impl IntoIterator<Item = Arc<Tool>>) -> (Registry, Vec<LoadError>) {
        let mut map: BTreeMap<String, Arc<Tool>> = BTreeMap::new();
        let mut errors = Vec::new();
        for tool in tools {
            if let Some(kept) = map.get(tool.name()) {
                errors.push(LoadError {
                    path: tool.source.clone(),
                    reason: LoadFailure::DuplicateName {
                        name: tool.name().to_owned(),
                        other: kept.source.clone(),
                    },
                });
                continue;
            }
            map.insert(tool.name().to_owned(), tool);
        }
        (Registry { tools: map }, errors)
    }

    /// The tool called `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }

    /// Every loaded tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.values()
    }

    /// The OpenAI `tools` array for a rojo's selection, sorted by name.
    pub fn definitions(&self, selection: &ToolSelection) -> Vec<Value> {
        self.tools
            .values()
            .filter(|t| selection.allows(t.name()))
            .map(|t| t.library.definition.clone())
            .collect()
    }
}

/// How a destructive tool's description starts.
pub const DESTRUCTIVE_MARK: &str = "[destructive: changes cannot be undone]";

/// The OpenAI function definition of a tool, with a parameters schema every provider accepts.
/// A destructive tool's description starts with [`DESTRUCTIVE_MARK`], for the model and for
/// clients (the OpenAI format has no field for it).
/// Computed once per loaded library, not per model turn.
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

/// The current registry, swapped atomically as a whole.
#[derive(Debug)]
pub struct RegistryHandle {
    current: ArcSwap<Registry>,
}

impl RegistryHandle {
    /// A handle holding `registry`.
    pub fn new(registry: Registry) -> Self {
        RegistryHandle {
            current: ArcSwap::from_pointee(registry),
        }
    }

    /// The current snapshot: hold it for one model turn.
    pub fn snapshot(&self) -> Arc<Registry> {
        self.current.load_full()
    }

    /// Replaces the registry; snapshots already taken are unaffected.
    pub fn replace(&self, registry: Registry) {
        self.current.store(Arc::new(registry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_registry_offers_nothing() {
        let (registry, errors) = Registry::build(Vec::new());
        assert!(errors.is_empty());
        assert!(registry.definitions(&ToolSelection::All).is_empty());
    }
}
