//! An MCP server's tools as registry tools: the naming rule `SERVER__TOOL`
//! (`docs/mcp.md`), the OpenAI definition offered to models, the input schema's validator,
//! and one call (schema check, then the server) with its result as the model's text.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rojos_llm::ToolDefinition;
use rojos_plugin_api::ErrorKind;
use serde_json::{json, Value};

use super::server::McpServer;
use rojos_plugin_host::{
    schema_problems, CallRequest, FailureKind, ToolArgs, ToolFailure, ToolOutcome,
};

/// The longest tool name OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_NAME: usize = 64;

/// The error kind of a result the MCP server marked `isError`.
pub const MCP_TOOL_ERROR: &str = "mcp_tool_error";

/// One tool of an MCP server, as the registry holds it.
pub struct McpTool {
    /// The model-facing name, `SERVER__TOOL`.
    pub name: String,
    /// The name the server knows it by.
    pub remote_name: String,
    /// The server that runs it.
    pub server: Arc<McpServer>,
    /// The OpenAI function definition offered to models.
    pub definition: Value,
    /// `definition` as every model request sends it, sanitised once here.
    pub offered: ToolDefinition,
    validator: jsonschema::Validator,
    schema: Value,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server.name())
            .finish_non_exhaustive()
    }
}

/// Why a listed tool is not offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// `SERVER__TOOL` is not a valid OpenAI tool name.
    #[error("tool {tool:?} of MCP server {server} is left out: {name:?} is longer than {MAX_NAME} characters or has characters other than letters, digits, '_' and '-'")]
    BadName {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
        /// The name it would have had.
        name: String,
    },
    /// Its input schema does not compile.
    #[error(
        "tool {tool:?} of MCP server {server} is left out: its input schema is invalid: {reason}"
    )]
    BadSchema {
        /// The server.
        server: String,
        /// The tool's own name.
        tool: String,
        /// The compiler's message.
        reason: String,
    },
}

/// The model-facing name of `tool` of `server`: `SERVER__TOOL`.
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

/// Whether `name` fits OpenAI's `^[a-zA-Z0-9_-]{1,64}$`.
fn valid_openai_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl McpTool {
    /// The registry tool for `listed`, a tool `server` listed.
    ///
    /// # Errors
    ///
    /// [`Unusable`] when its name breaks the naming rule or its schema does not compile.
    pub fn new(server: &Arc<McpServer>, listed: &Tool) -> Result<McpTool, Unusable> {
        let name = qualified_name(server.name(), &listed.name);
        if !valid_openai_name(&name) {
            return Err(Unusable::BadName {
                server: server.name().to_owned(),
                tool: listed.name.to_string(),
                name,
            });
        }
        let schema = Value::Object((*listed.input_schema).clone());
        let validator = jsonschema::validator_for(&schema).map_err(|e| Unusable::BadSchema {
            server: server.name().to_owned(),
            tool: listed.name.to_string(),
            reason: e.to_string(),
        })?;
        let description = listed.description.as_deref().unwrap_or_default();
        let definition = json!({"type": "function", "function": {
            "name": name,
            "description": description,
            "parameters": schema,
        }});
        let offered = ToolDefinition::new(&definition).map_err(|_| Unusable::BadName {
            server: server.name().to_owned(),
            tool: listed.name.to_string(),
            name: name.clone(),
        })?;
        Ok(McpTool {
            offered,
            name,
            remote_name: listed.name.to_string(),
            server: Arc::clone(server),
            definition,
            validator,
            schema,
        })
    }

    /// Runs one call: `args` checked against the input schema (a mismatch never reaches the
    /// server), then `tools/call` within `request.timeout`.
    pub async fn invoke(&self, args: &ToolArgs, request: &CallRequest) -> ToolOutcome {
        self.check_args(args)?;
        self.call_checked(args, request).await
    }

    /// Runs one call whose `args` the caller has already checked ([`Self::check_args`]):
    /// `tools/call` within `request.timeout`.
    pub async fn call_checked(&self, args: &ToolArgs, request: &CallRequest) -> ToolOutcome {
        let result = self.server.call(&self.remote_name, args, request).await?;
        result_text(&self.name, result)
    }

    /// Checks `args` against the input schema: the failure the model reads when they do
    /// not fit.
    ///
    /// # Errors
    ///
    /// [`FailureKind::InvalidArguments`], saying what does not fit and the expected schema.
    pub fn check_args(&self, args: &ToolArgs) -> Result<(), ToolFailure> {
        let problems = schema_problems(&self.validator, args);
        if problems.is_empty() {
            return Ok(());
        }
        Err(ToolFailure::new(
            FailureKind::InvalidArguments,
            format!(
                "invalid arguments for {}: {}; expected parameters: {}",
                self.name,
                problems.join("; "),
                self.schema
            ),
        ))
    }
}

/// The model's text of a `tools/call` result: its text blocks joined by newlines (other
/// blocks are named by kind), or, without text, its structured content as JSON. An
/// `isError` result is a failure with that text.
fn result_text(tool: &str, result: CallToolResult) -> ToolOutcome {
    let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        let text = if text.is_empty() {
            format!("tool {tool} reported an error without a message")
        } else {
            text
        };
        return Err(ToolFailure::new(
            FailureKind::Plugin(ErrorKind(MCP_TOOL_ERROR.into())),
            text,
        ));
    }
    Ok(text)
}

fn block_text(block: &ContentBlock) -> String {
    match block.as_text() {
        Some(text) => text.text.clone(),
        None => "[a non-text content block, not shown]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_within_the_openai_pattern_are_valid() {
        assert!(valid_openai_name(&qualified_name("files", "read_file")));
        assert!(!valid_openai_name(&qualified_name("files", "read.file")));
        assert!(!valid_openai_name(&qualified_name(
            "files",
            &"x".repeat(58)
        )));
        assert!(valid_openai_name(&qualified_name("files", &"x".repeat(57))));
    }

    #[test]
    fn an_error_result_is_a_failure_with_its_text() {
        let result = CallToolResult::error(vec![ContentBlock::text("boom")]);
        let failure = result_text("t__x", result).unwrap_err();
        assert_eq!(failure.message, "boom");
        let ok = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(result_text("t__x", ok).unwrap(), "a\nb");
    }
}
