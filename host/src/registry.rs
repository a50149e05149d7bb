//! The tool registry: an immutable snapshot of the loaded tools by name, behind an atomically
//! swapped `Arc`. Each model turn takes one snapshot, so a reload never changes the tools
//! under a running turn. Also builds the OpenAI `tools` array a rojo offers its model.
//!
//! The registry sits above `plugins`: it consumes the [`Tool`]s the loader produces (each
//! with its OpenAI definition already computed) and the drop-in folder's current set, through
//! [`Publisher`]; `plugins` never names the registry.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use arc_swap::ArcSwap;
use serde_json::Value;

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

    /// The names of the loaded tools, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
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

/// Publishes the built-in tools plus the drop-in folder's current ones (`plugins::DropIn`):
/// built-ins always win a name clash, then drop-ins in the order given; each clash is logged
/// once, not at every change.
#[derive(Debug)]
pub struct Publisher {
    builtins: Vec<Arc<Tool>>,
    handle: Arc<RegistryHandle>,
    reported: HashSet<String>,
}

impl Publisher {
    /// A publisher into `handle` of `builtins` and whatever drop-ins it is given.
    pub fn new(builtins: Vec<Arc<Tool>>, handle: Arc<RegistryHandle>) -> Publisher {
        Publisher {
            builtins,
            handle,
            reported: HashSet::new(),
        }
    }

    /// Builds and swaps in the registry of the built-ins and `dropins`.
    pub fn publish(&mut self, dropins: Vec<Arc<Tool>>) {
        let (registry, clashes) = Registry::build(self.builtins.iter().cloned().chain(dropins));
        for clash in clashes {
            let line = clash.to_string();
            if self.reported.insert(line.clone()) {
                tracing::warn!("{line}");
            }
        }
        self.handle.replace(registry);
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
