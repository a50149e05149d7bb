//! A rojo's `approve` key: which of its tools wait for the user's decision before they run
//! (`docs/configuration.md`, "Approvals"), and `[limits] approval_timeout_secs`.

use std::{collections::BTreeSet, time::Duration};

use super::{invalid, raw::RawNames, ConfigError, ToolSelection};

/// How long a call waits for a decision unless `[limits] approval_timeout_secs` says
/// otherwise; then it is denied.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest accepted `approval_timeout_secs`: a day.
pub(super) const MAX_APPROVAL_TIMEOUT_SECS: f64 = 86_400.0;

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
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        match self {
            ApprovalRule::Only(names) => Some(names.iter()),
            _ => None,
        }
        .into_iter()
        .flatten()
    }
}

/// `rojos.NAME.approve`: absent, `"destructive"`, or a list of tool names.
pub(super) fn parse(rojo: &str, raw: Option<&RawNames>) -> Result<ApprovalRule, ConfigError> {
    let key = format!("rojos.{rojo}.approve");
    match raw {
        None => Ok(ApprovalRule::Nothing),
        Some(RawNames::One(word)) if word == "destructive" => Ok(ApprovalRule::Destructive),
        Some(RawNames::One(other)) => Err(invalid(
            key,
            format!(
                "unknown value {other:?}: write \"destructive\" or a list of tool names, e.g. [\"delete_path\"]"
            ),
        )),
        Some(RawNames::List(names)) => Ok(ApprovalRule::Only(names.iter().cloned().collect())),
    }
}

/// Checks that every tool `rojo`'s `approve` names is one the rojo enables (a name it
/// cannot call would never ask: most likely a typo). `known` says whether a tool is loaded.
pub(super) fn check(
    rojo: &str,
    rule: &ApprovalRule,
    enabled: &ToolSelection,
    known: &dyn Fn(&str) -> bool,
) -> Result<(), ConfigError> {
    for name in rule.names() {
        let why = if !known(name) {
            "no loaded plugin or configured MCP server provides it"
        } else if !enabled.allows(name) {
            "it is not enabled for this rojo (see its tools key)"
        } else {
            continue;
        };
        return Err(invalid(
            format!("rojos.{rojo}.approve"),
            format!("tool {name:?} cannot need approval: {why}"),
        ));
    }
    Ok(())
}
