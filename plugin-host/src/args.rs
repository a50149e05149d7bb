//! A call's arguments on their way to the plugin: the JSON object `rojos_llm` parsed from the
//! model's text, kept as the one `Value` the schema check reads, and serialised once, when
//! made, into the text the plugin is handed across the C ABI (which the repeated-call check
//! compares too).

use serde_json::{Map, Value};

use super::loader::Library;

/// The model's arguments for one call: always a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolArgs {
    value: Value,
    text: String,
}

impl ToolArgs {
    /// The arguments `fields`, written as JSON text here, once.
    pub fn new(fields: Map<String, Value>) -> ToolArgs {
        let value = Value::Object(fields);
        let text = value.to_string();
        ToolArgs { value, text }
    }

    /// The arguments as the JSON object they are (for a schema check or an MCP server).
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The text the plugin is given: the object's compact JSON, as serde_json writes it
    /// (keys sorted).
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl TryFrom<Value> for ToolArgs {
    type Error = Value;

    /// The arguments `value`, or `value` back if it is not a JSON object.
    fn try_from(value: Value) -> Result<ToolArgs, Value> {
        match value {
            Value::Object(fields) => Ok(ToolArgs::new(fields)),
            other => Err(other),
        }
    }
}

/// Arguments that do not fit the tool's schema; the message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "invalid arguments for {tool}: {}; expected parameters: {expected}",
    problems.join("; ")
)]
pub(super) struct ArgsMismatch {
    /// The tool.
    pub tool: String,
    /// The first few violations, each with the place in the arguments where it is.
    pub problems: Vec<String>,
    /// The tool's parameters schema.
    pub expected: Value,
}

/// What in `args` breaks the schema `validator` checks: at most five violations, each with
/// where it is (`/path: why`). Empty when the arguments fit. Plugin and MCP tools alike.
pub fn schema_problems(validator: &jsonschema::Validator, args: &ToolArgs) -> Vec<String> {
    validator
        .iter_errors(&args.value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect()
}

/// Checks `args` against the tool's schema (at most five violations are reported).
pub(super) fn check_args(library: &Library, args: &ToolArgs) -> Result<(), ArgsMismatch> {
    let problems = schema_problems(&library.validator, args);
    if problems.is_empty() {
        return Ok(());
    }
    let spec = &library.manifest.spec;
    Err(ArgsMismatch {
        tool: spec.name.clone(),
        problems,
        expected: spec.parameters.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_plugin_gets_the_text_the_host_always_sent() {
        // Before arguments were parsed once, the host handed the plugin
        // `Value::Object(map.clone()).to_string()`; nested values, escapes and numbers must
        // come out byte for byte the same.
        let value = json!({
            "path": "docs/ä \"q\".txt",
            "edits": [{"old": "a\nb", "new": null}, {"old": "c", "new": 1.5}],
            "options": {"z": true, "a": [1, -2, 3e3]},
        });
        let Value::Object(map) = value else {
            unreachable!("a json! object")
        };
        let before = Value::Object(map.clone()).to_string();
        assert_eq!(ToolArgs::new(map).text(), before);
        assert!(before.starts_with(r#"{"edits":[{"new":null,"old":"a\nb"}"#));
    }

    #[test]
    fn a_mismatch_names_the_tool_each_problem_and_the_schema() {
        let mismatch = ArgsMismatch {
            tool: "list_files".to_owned(),
            problems: vec![
                "/path: 3 is not of type \"string\"".to_owned(),
                "x".to_owned(),
            ],
            expected: json!({"type": "object"}),
        };
        assert_eq!(
            mismatch.to_string(),
            r#"invalid arguments for list_files: /path: 3 is not of type "string"; x; expected parameters: {"type":"object"}"#
        );
    }

    #[test]
    fn only_an_object_makes_arguments() {
        assert!(ToolArgs::try_from(json!({"path": "."})).is_ok());
        assert_eq!(ToolArgs::try_from(json!([1, 2])), Err(json!([1, 2])));
        assert_eq!(ToolArgs::try_from(json!("docs")), Err(json!("docs")));
    }
}
