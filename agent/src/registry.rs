//! The tool registry: an immutable snapshot of the loaded tools by name, behind an atomically
//! swapped `Arc`. Each model turn takes one snapshot, so a reload never changes the tools
//! under a running turn. Also builds the OpenAI `tools` array a rojo offers its model.
//!
//! The registry sits above the plugin host and the MCP client: it consumes the [`Tool`]s the loader
//! produces (each with its OpenAI definition already computed), the drop-in folder's current
//! set and the MCP servers' current [`McpTool`]s, all through [`ToolSources`]; each is a
//! [`RegisteredTool`], whose [`RegisteredTool::invoke`] is the one place the two kinds part.

use std::{
    collections::{BTreeMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
};

use arc_swap::ArcSwap;
use rojos_llm::ToolDefinition;
use serde_json::Value;
use tokio::sync::watch;

use rojos_mcp_client::McpTool;
use rojos_plugin_host::{
    check_call_args, invoke_around, AroundCall, CallRequest, LoadError, LoadFailure, Tool,
    ToolArgs, ToolFailure, ToolOutcome,
};

use crate::rojo::ToolSelection;

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

    /// Whether its plugin's manifest says it is destructive (an MCP tool never is: its
    /// annotations are the server's own hints; `docs/configuration.md`, "Approvals").
    pub fn destructive(&self) -> bool {
        match self {
            RegisteredTool::Plugin(tool) => tool.library.manifest.spec.destructive,
            RegisteredTool::Mcp(_) => false,
        }
    }

    /// The OpenAI function definition.
    pub fn definition(&self) -> &Value {
        match self {
            RegisteredTool::Plugin(tool) => &tool.library.definition,
            RegisteredTool::Mcp(tool) => &tool.definition,
        }
    }

    /// The definition every model request offers (sanitised once, when the tool was loaded).
    pub fn offered(&self) -> &ToolDefinition {
        match self {
            RegisteredTool::Plugin(tool) => &tool.library.offered,
            RegisteredTool::Mcp(tool) => &tool.offered,
        }
    }

    /// The arguments naming paths the tool changes (the plugin's `changes_paths`, see
    /// docs/plugins.md); an MCP server's tool declares none.
    pub fn changes_paths(&self) -> &[String] {
        match self {
            RegisteredTool::Plugin(tool) => &tool.library.manifest.spec.changes_paths,
            RegisteredTool::Mcp(_) => &[],
        }
    }

    /// The arguments naming paths the tool only creates (the plugin's `creates_paths`);
    /// an MCP server's tool declares none.
    pub fn creates_paths(&self) -> &[String] {
        match self {
            RegisteredTool::Plugin(tool) => &tool.library.manifest.spec.creates_paths,
            RegisteredTool::Mcp(_) => &[],
        }
    }

    /// Why its plugin is quarantined, if it is (never an MCP tool): it is then neither offered
    /// to models nor run (docs/plugins.md, "Quarantine").
    pub fn quarantined(&self) -> Option<String> {
        match self {
            RegisteredTool::Plugin(tool) => tool.library.quarantined(),
            RegisteredTool::Mcp(_) => None,
        }
    }

    /// Where it comes from: the plugin file, or `mcp:SERVER`.
    pub fn source(&self) -> PathBuf {
        match self {
            RegisteredTool::Plugin(tool) => tool.source.clone(),
            RegisteredTool::Mcp(tool) => PathBuf::from(format!("mcp:{}", tool.server.name())),
        }
    }

    /// Checks `args` against the tool's schema, as [`RegisteredTool::invoke`] does again
    /// before it runs: a call that does not fit is refused before anyone is asked to approve
    /// it.
    ///
    /// # Errors
    ///
    /// The failure the model reads, saying what does not fit.
    pub fn check_args(&self, args: &ToolArgs) -> Result<(), ToolFailure> {
        match self {
            RegisteredTool::Plugin(tool) => check_call_args(tool, args),
            RegisteredTool::Mcp(tool) => tool.check_args(args),
        }
    }

    /// Runs one call whose `args` passed [`Self::check_args`] (the agent checks them before a
    /// call is asked about or admitted) within `request.timeout`, with `around` just before
    /// and after a plugin's call on its thread.
    pub async fn invoke(
        &self,
        args: &ToolArgs,
        request: &CallRequest,
        around: Option<Box<dyn AroundCall>>,
    ) -> ToolOutcome {
        match self {
            RegisteredTool::Plugin(tool) => invoke_around(tool, args, request, around).await,
            RegisteredTool::Mcp(tool) => {
                // An MCP server's tool declares no paths it changes: nothing is recorded.
                debug_assert!(around.is_none(), "an MCP tool changes no declared paths");
                tool.call_checked(args, request).await
            }
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

    /// The OpenAI `tools` array for a rojo's selection, sorted by name (quarantined tools
    /// left out).
    pub fn definitions(&self, selection: &ToolSelection) -> Vec<Value> {
        self.selected(selection)
            .map(|t| t.definition().clone())
            .collect()
    }

    /// The selection's quarantined tools, sorted by name: each one's definition with a
    /// `quarantined` member saying why (`GET /tools`, docs/api.md).
    pub fn quarantined(&self, selection: &ToolSelection) -> Vec<Value> {
        self.tools
            .values()
            .filter(|t| selection.allows(t.name()))
            .filter_map(|t| {
                let reason = t.quarantined()?;
                let mut definition = t.definition().clone();
                definition["quarantined"] = Value::from(reason);
                Some(definition)
            })
            .collect()
    }

    /// The tools a rojo's selection offers to its model, sorted by name (quarantined tools
    /// left out): shared, not copied.
    pub fn offered(&self, selection: &ToolSelection) -> Vec<ToolDefinition> {
        self.selected(selection)
            .map(|t| t.offered().clone())
            .collect()
    }

    /// The tools `selection` allows and that are not quarantined, sorted by name.
    fn selected<'a>(
        &'a self,
        selection: &'a ToolSelection,
    ) -> impl Iterator<Item = &'a RegisteredTool> + 'a {
        self.tools
            .values()
            .filter(|t| selection.allows(t.name()) && t.quarantined().is_none())
    }
}

/// The current registry, swapped atomically as a whole.
#[derive(Debug)]
pub struct RegistryHandle {
    current: ArcSwap<Registry>,
    /// The configured MCP servers (fixed at start), running or not: a rojo may name their
    /// tools before they are listed (`LiveConfig::check_tools`).
    mcp_servers: Vec<String>,
    /// Marked at each replacement, so MCP sessions learn that their offered list may have
    /// changed (the crate `rojos-mcp-server`).
    changes: watch::Sender<()>,
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
            changes: watch::Sender::new(()),
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
        self.changes.send_replace(());
    }

    /// A receiver that sees each later [`RegistryHandle::replace`].
    pub fn changes(&self) -> watch::Receiver<()> {
        self.changes.subscribe()
    }
}

/// Every source of tools, and the registry built from them, rebuilt whenever one changes:
/// the configured plugins (fixed), each MCP server's current list (`mcp::client`: changed by
/// `notifications/tools/list_changed`, a restart or a late start) and the drop-in folder's
/// current set (`plugins::DropIn`). A name clash keeps the first of: configured plugin, MCP
/// tool (servers in configuration order), drop-in (in the order given), as `docs/mcp.md`
/// says; each clash is logged once, not at every change.
#[derive(Debug)]
pub struct ToolSources {
    handle: Arc<RegistryHandle>,
    inner: Mutex<Sources>,
}

#[derive(Debug, Default)]
struct Sources {
    plugins: Vec<RegisteredTool>,
    mcp: Vec<(String, Vec<RegisteredTool>)>,
    dropins: Vec<RegisteredTool>,
    reported: HashSet<String>,
}

impl ToolSources {
    /// The sources `plugins` and `mcp` (each configured server's name and tools, in
    /// configuration order), published into `handle` at once.
    pub fn new(
        plugins: Vec<RegisteredTool>,
        mcp: Vec<(String, Vec<Arc<McpTool>>)>,
        handle: Arc<RegistryHandle>,
    ) -> ToolSources {
        let mcp = mcp
            .into_iter()
            .map(|(server, tools)| (server, tools.into_iter().map(RegisteredTool::Mcp).collect()))
            .collect();
        let sources = ToolSources {
            handle,
            inner: Mutex::new(Sources {
                plugins,
                mcp,
                ..Sources::default()
            }),
        };
        sources.publish(&mut sources.lock());
        sources
    }

    /// Replaces the drop-in folder's tools and publishes.
    pub fn set_dropins(&self, dropins: Vec<Arc<Tool>>) {
        let mut sources = self.lock();
        sources.dropins = dropins.into_iter().map(RegisteredTool::Plugin).collect();
        self.publish(&mut sources);
    }

    /// Replaces MCP server `server`'s tools and publishes, unless they are the same names
    /// and definitions as before; a change is logged once (`MCP server X: tools changed:
    /// +a −b ~c`, `~` for a changed definition).
    pub fn set_mcp_tools(&self, server: &str, tools: Vec<Arc<McpTool>>) {
        let mut sources = self.lock();
        let new: Vec<RegisteredTool> = tools.into_iter().map(RegisteredTool::Mcp).collect();
        let Some(slot) = sources.mcp.iter_mut().find(|(name, _)| name == server) else {
            tracing::warn!(
                "MCP server {server}: tools listed by a server that is not configured; ignored"
            );
            return;
        };
        let Some(change) = ListChange::between(&slot.1, &new) else {
            return;
        };
        tracing::info!(mcp_server = %server, "MCP server {server}: tools changed: {change}");
        slot.1 = new;
        self.publish(&mut sources);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sources> {
        // A panic while publishing leaves the sources whole (each field is replaced at once).
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, sources: &mut Sources) {
        let all = sources
            .plugins
            .iter()
            .chain(sources.mcp.iter().flat_map(|(_, tools)| tools))
            .chain(&sources.dropins)
            .cloned()
            .collect::<Vec<_>>();
        let (registry, clashes) = Registry::build(all);
        for clash in clashes {
            let line = clash.to_string();
            if sources.reported.insert(line.clone()) {
                tracing::warn!("{line}");
            }
        }
        self.handle.replace(registry);
    }
}

/// A list's definitions by name.
fn definitions_by_name(tools: &[RegisteredTool]) -> BTreeMap<&str, &Value> {
    tools.iter().map(|t| (t.name(), t.definition())).collect()
}

/// What changed between two lists of one server's tools.
#[derive(Debug, PartialEq, Eq)]
struct ListChange {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<String>,
}

impl ListChange {
    /// The change from `old` to `new`, or `None` when they offer the same.
    fn between(old: &[RegisteredTool], new: &[RegisteredTool]) -> Option<ListChange> {
        Self::of(&definitions_by_name(old), &definitions_by_name(new))
    }

    /// The change between two lists of definitions by name.
    fn of(old: &BTreeMap<&str, &Value>, new: &BTreeMap<&str, &Value>) -> Option<ListChange> {
        let names = |keep: &dyn Fn(&&str) -> bool, from: &BTreeMap<&str, &Value>| {
            from.keys()
                .filter(|n| keep(n))
                .map(|n| (*n).to_owned())
                .collect::<Vec<_>>()
        };
        let change = ListChange {
            added: names(&|n| !old.contains_key(n), new),
            removed: names(&|n| !new.contains_key(n), old),
            changed: names(
                &|n| matches!((old.get(n), new.get(n)), (Some(was), Some(is)) if was != is),
                old,
            ),
        };
        let same =
            change.added.is_empty() && change.removed.is_empty() && change.changed.is_empty();
        (!same).then_some(change)
    }
}

impl std::fmt::Display for ListChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = (self.added.iter().map(|n| format!("+{n}")))
            .chain(self.removed.iter().map(|n| format!("\u{2212}{n}")))
            .chain(self.changed.iter().map(|n| format!("~{n}")))
            .collect();
        f.write_str(&parts.join(" "))
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

    #[test]
    fn a_list_change_names_the_tools_added_removed_and_changed_and_none_is_no_change() {
        fn list<'a>(tools: &[(&'a str, &'a Value)]) -> BTreeMap<&'a str, &'a Value> {
            tools.iter().copied().collect()
        }
        let (one, two) = (&serde_json::json!({"v": 1}), &serde_json::json!({"v": 2}));
        let old = list(&[("s__kept", one), ("s__gone", one), ("s__edited", one)]);
        let new = list(&[("s__kept", one), ("s__edited", two), ("s__new", one)]);
        let change = ListChange::of(&old, &new).expect("a change");
        assert_eq!(
            change,
            ListChange {
                added: vec!["s__new".into()],
                removed: vec!["s__gone".into()],
                changed: vec!["s__edited".into()],
            }
        );
        assert_eq!(change.to_string(), "+s__new \u{2212}s__gone ~s__edited");
        assert_eq!(ListChange::of(&old, &old.clone()), None, "the same list");
        for (old, new, what) in [
            (list(&[]), list(&[("s__a", one)]), "only added"),
            (list(&[("s__a", one)]), list(&[]), "only removed"),
            (
                list(&[("s__a", one)]),
                list(&[("s__a", two)]),
                "only changed",
            ),
        ] {
            assert!(ListChange::of(&old, &new).is_some(), "{what}");
        }
    }
}
