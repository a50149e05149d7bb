//! The registry's tool definitions (the OpenAI `tools` array `GET /tools` shows) as MCP
//! `Tool`s: the same name and description, the function's `parameters` as `inputSchema`.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;

/// The MCP tool of one OpenAI definition (`{"type":"function","function":{…}}`), or `None`
/// when it has no name or its parameters are not a JSON object (the loader refuses such
/// definitions, so this does not happen to a loaded tool).
pub(super) fn mcp_tool(definition: &Value) -> Option<Tool> {
    let function = definition.get("function")?;
    let name = function.get("name")?.as_str()?.to_owned();
    let description = function
        .get("description")
        .and_then(Value::as_str)
        .map(|text| text.to_owned().into());
    let input_schema = function.get("parameters")?.as_object()?.clone();
    Some(Tool::new_with_raw(
        name,
        description,
        Arc::new(input_schema),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_description_and_parameters_become_the_mcp_tool() {
        let definition = json!({"type": "function", "function": {
            "name": "read_path_meta",
            "description": "Size and kind of a path.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }});
        let tool = mcp_tool(&definition).unwrap();
        assert_eq!(tool.name, "read_path_meta");
        assert_eq!(
            tool.description.as_deref(),
            Some("Size and kind of a path.")
        );
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        );
    }

    #[test]
    fn a_definition_without_object_parameters_is_left_out() {
        let definition = json!({"type": "function", "function": {"name": "x", "parameters": 3}});
        assert!(mcp_tool(&definition).is_none());
    }
}
