//! The tool registry: an immutable snapshot of the loaded tools by name, behind an atomically
//! swapped `Arc`. Each model turn takes one snapshot, so a reload never changes the tools
//! under a running turn. Also builds the OpenAI `tools` array a rojo offers its model.
//!
//! The registry sits above `plugins` and `mcp::client`: it consumes the [`Tool`]s the loader
//! produces (each with its OpenAI definition already computed), the drop-in folder's current
//! set through [`Publisher`], and the MCP servers' [`McpTool`]s; each is a
//! [`RegisteredTool`], whose [`RegisteredTool::invoke`] is the one place the two kinds part.

use std::{
    collections::{BTreeMap, HashSet},
    path::PathBuf,
    sync::Arc,
};

use arc_swap::ArcSwap;
use serde_json::Value;

use crate::{
    config::ToolSelection,
    mcp::client::McpTool,
    plugins::{invoke, CallRequest, LoadError, LoadFailure, Tool, ToolArgs, ToolOutcome},
};

/// A tool of either source.
#[derive(Debug, Clone)]
pub enum RegisteredTool {
    /// A plugin's tool.
    Plugin(Arc<Tool>),
    /// A tool of an MCP server (`docs/mcp.md`).
    Mcp(Arc<McpTool>),
}

impl RegisteredTool {
    /// The model-facing name.
    pub fn name(&self) -> &str {
        match self {
            RegisteredTool::Plugin(tool) => tool.name(),
            RegisteredTool::Mcp(tool) => &tool.name,
        }
    }

    /// The OpenAI function definition.
    pub fn definition(&self) -> &Value {
        match self {
            RegisteredTool::Plugin(tool) => &tool.library.definition,
            RegisteredTool::Mcp(tool) => &tool.definition,
        }
    }

    /// Where it comes from: the plugin file, or `mcp:SERVER`.
    pub fn source(&self) -> PathBuf {
        match self {
            RegisteredTool::Plugin(tool) => tool.source.clone(),
            RegisteredTool::Mcp(tool) => PathBuf::from(format!("mcp:{}", tool.server.name())),
        }
    }

    /// Runs one call (the schema check included) within `request.timeout`.
    pub async fn invoke(&self, args: &ToolArgs, request: &CallRequest) -> ToolOutcome {
        match self {
            RegisteredTool::Plugin(tool) => invoke(tool, args, request).await,
            RegisteredTool::Mcp(tool) => tool.invoke(args, request).await,
        }
    }
}

/// One immutable set of tools.
#[derive(Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl Registry {
    /// Builds a registry from tools in priority order: the first tool of a name wins, each
    /// later one is returned as a [`LoadFailure::DuplicateName`] error.
    pub fn build(tools: impl IntoIterator<Item = RegisteredTool>) -> (Registry, Vec<LoadError>) {
        let mut map: BTreeMap<String, RegisteredTool> = BTreeMap::new();
        let mut errors = Vec::new();
        for tool in tools {
            if let Some(kept) = map.get(tool.name()) {
                errors.push(LoadError {
                    path: tool.source(),
                    reason: LoadFailure::DuplicateName {
                        name: tool.name().to_owned(),
                        other: kept.source(),
                    },
                });
                continue;
            }
            map.insert(tool.name().to_owned(), tool);
        }
        (Registry { tools: map }, errors)
    }

    /// The tool called `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    /// Every loaded tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &RegisteredTool> {
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
            .map(|t| t.definition().clone())
            .collect()
    }
}

/// The current registry, swapped atomically as a whole.
#[derive(Debug)]
pub struct RegistryHandle {
    current: ArcSwap<Registry>,
    /// The configured MCP servers (fixed at start), running or not: a rojo may name their
    /// tools before they are listed (`LiveConfig::check_tools`).
    mcp_servers: Vec<String>,
}

impl RegistryHandle {
    /// A handle holding `registry`.
    pub fn new(registry: Registry) -> Self {
        RegistryHandle::with_mcp_servers(registry, Vec::new())
    }

    /// A handle holding `registry`, with the names of the configured MCP servers.
    pub fn with_mcp_servers(registry: Registry, mcp_servers: Vec<String>) -> Self {
        RegistryHandle {
            current: ArcSwap::from_pointee(registry),
            mcp_servers,
        }
    }

    /// The configured MCP servers' names.
    pub fn mcp_servers(&self) -> Vec<&str> {
        self.mcp_servers.iter().map(String::as_str).collect()
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
/// once, not at every change. `builtins` holds the MCP servers' tools after the plugins'.
#[derive(Debug)]
pub struct Publisher {
    builtins: Vec<RegisteredTool>,
    handle: Arc<RegistryHandle>,
    reported: HashSet<String>,
}

impl Publisher {
    /// A publisher into `handle` of `builtins` and whatever drop-ins it is given.
    pub fn new(builtins: Vec<RegisteredTool>, handle: Arc<RegistryHandle>) -> Publisher {
        Publisher {
            builtins,
            handle,
            reported: HashSet::new(),
        }
    }

    /// Builds and swaps in the registry of the built-ins and `dropins`.
    pub fn publish(&mut self, dropins: Vec<Arc<Tool>>) {
        let dropins = dropins.into_iter().map(RegisteredTool::Plugin);
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
