//! A rojo's `approve` key: which of its tools wait for the user's decision before they run
//! (`docs/configuration.md`, "Approvals"), and `[limits] approval_timeout_secs`.

use std::time::Duration;

use rojos_agent::rojo::{ApprovalRule, ToolSelection};

use super::{
    keys::{invalid, ConfigError},
    raw::RawNames,
};

/// How long a call waits for a decision unless `[limits] approval_timeout_secs` says
/// otherwise; then it is denied.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest accepted `approval_timeout_secs`: a day.
pub(super) const MAX_APPROVAL_TIMEOUT_SECS: f64 = 86_400.0;

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_key_is_destructive_or_a_list_and_nothing_else() {
        assert_eq!(parse("r", None).unwrap(), ApprovalRule::Nothing);
        let destructive = RawNames::One("destructive".into());
        assert_eq!(
            parse("r", Some(&destructive)).unwrap(),
            ApprovalRule::Destructive
        );
        let typo = RawNames::One("destructiv".into());
        let error = parse("writer", Some(&typo)).unwrap_err().to_string();
        assert!(
            error.contains("rojos.writer.approve") && error.contains("\"destructiv\""),
            "{error}"
        );
        let list = RawNames::List(vec!["delete_path".into()]);
        let rule = parse("r", Some(&list)).unwrap();
        assert!(rule.requires("delete_path", false));
        assert!(!rule.requires("move_path", true));
        assert!(ApprovalRule::Destructive.requires("move_path", true));
        assert!(!ApprovalRule::Destructive.requires("list_files", false));
        assert!(!ApprovalRule::Nothing.requires("delete_path", true));
    }

    #[test]
    fn a_listed_tool_must_be_loaded_and_enabled_for_the_rojo() {
        let rule = ApprovalRule::Only(BTreeSet::from(["delete_path".to_owned()]));
        let loaded = |name: &str| name == "delete_path" || name == "list_files";
        assert!(check("r", &rule, &ToolSelection::All, &loaded).is_ok());
        let only_list = ToolSelection::Only(BTreeSet::from(["list_files".to_owned()]));
        let error = check("reader", &rule, &only_list, &loaded)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("rojos.reader.approve")
                && error.contains("\"delete_path\"")
                && error.contains("not enabled"),
            "{error}"
        );
        let error = check("r", &rule, &ToolSelection::All, &|_| false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("no loaded plugin"), "{error}");
    }
}
