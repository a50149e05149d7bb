//! A rojo, as the agent runs it: [`RojoConfig`] (its providers, prompt, tools, step limit,
//! approvals and context window, read from `[rojos.NAME]` by `rojos-config`), which tools
//! it enables ([`ToolSelection`]) and which wait for the user's approval ([`ApprovalRule`]).

use std::{collections::BTreeSet, num::NonZeroU32, sync::Arc};

/// `[rojos.NAME]`.
#[derive(Debug, Clone)]
pub struct RojoConfig {
    /// The providers this rojo may talk to, in order of preference (at least one): the first
    /// available one is used.
    pub providers: Vec<String>,
    /// The system prompt, if any, shared by every model turn's request.
    pub system_prompt: Option<Arc<str>>,
    /// Which tools it may use.
    pub tools: ToolSelection,
    /// Model turns per user message: at least one, so every run makes a turn and ends with
    /// `DONE`.
    pub max_steps: NonZeroU32,
    /// Which tools wait for the user's approval (`approve`).
    pub approve: ApprovalRule,
    /// The model's context window in tokens (`context_tokens`), over its provider's.
    pub context_tokens: Option<u64>,
    /// How full the window may get, in percent, before older messages are shortened and
    /// summarised (`compact_at_percent`, default 80); 0 never does, and a conversation that
    /// outgrows the window then ends with the provider's error.
    pub compact_at_percent: u8,
}

/// A rojo's enabled tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSelection {
    /// `"*"`: every loaded tool.
    All,
    /// Only these names.
    Only(BTreeSet<String>),
}

impl ToolSelection {
    /// Whether the tool `name` is enabled.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ToolSelection::All => true,
            ToolSelection::Only(set) => {
                set.contains(name) || set.iter().any(|entry| server_wildcard(entry, name))
            }
        }
    }
}

/// Whether `entry` is `SERVER__*` (every tool of an MCP server, `docs/mcp.md`) and `name`
/// one of that server's tools.
fn server_wildcard(entry: &str, name: &str) -> bool {
    entry
        .strip_suffix('*')
        .is_some_and(|prefix| prefix.ends_with("__") && name.starts_with(prefix))
}

/// Which tools of a rojo need the user's approval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApprovalRule {
    /// None (the default): every call runs at once.
    #[default]
    Nothing,
    /// `"destructive"`: every plugin tool whose manifest says destructive (MCP tools only by
    /// name: their annotations are hints a server sets for itself).
    Destructive,
    /// These tool names.
    Only(BTreeSet<String>),
}

impl ApprovalRule {
    /// Whether a call of `name` (`destructive`: its manifest says so) needs approval.
    pub fn requires(&self, name: &str, destructive: bool) -> bool {
        match self {
            ApprovalRule::Nothing => false,
            ApprovalRule::Destructive => destructive,
            ApprovalRule::Only(names) => names.contains(name),
        }
    }

    /// The names listed, for the check against the loaded tools.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        match self {
            ApprovalRule::Only(names) => Some(names.iter()),
            _ => None,
        }
        .into_iter()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_selection_enables_its_names_and_a_server_wildcard_only_that_servers_tools() {
        assert!(ToolSelection::All.allows("anything"));
        let only = ToolSelection::Only(names(&["list_files", "docs__*", "bare*"]));
        assert!(only.allows("list_files"));
        assert!(!only.allows("read_file"), "a name not listed");
        assert!(only.allows("docs__search"), "a tool of the server `docs`");
        assert!(!only.allows("other__search"), "another server's tool");
        assert!(
            !only.allows("docs_search"),
            "one underscore is not the server separator"
        );
        assert!(
            !only.allows("bare_tool"),
            "a star without `__` is no wildcard"
        );
        assert!(
            !ToolSelection::Only(BTreeSet::new()).allows("list_files"),
            "nothing listed, nothing enabled"
        );
    }

    #[test]
    fn approval_is_needed_for_nothing_destructive_tools_or_the_names_listed() {
        assert!(!ApprovalRule::Nothing.requires("delete_path", true));
        assert!(ApprovalRule::Destructive.requires("delete_path", true));
        assert!(!ApprovalRule::Destructive.requires("list_files", false));
        let only = ApprovalRule::Only(names(&["write_text_content"]));
        assert!(only.requires("write_text_content", false));
        assert!(!only.requires("delete_path", true), "only the names listed");
        assert_eq!(only.names().collect::<Vec<_>>(), ["write_text_content"]);
        assert_eq!(ApprovalRule::Destructive.names().count(), 0);
    }
}
