//! A rojo's enabled tools (`tools = "*"` or a list, `SERVER__*` for every tool of an MCP
//! server).

use std::collections::BTreeSet;

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
