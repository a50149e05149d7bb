//! Test plugin `hang_tool`: blocks for `seconds` (default an hour), to show that a hung
//! plugin costs one call, which times out, while the server and other tools keep serving.

#![forbid(unsafe_code)]

use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};

/// Sleeps, then answers `{"slept":N}`.
#[derive(Debug)]
pub struct HangTool;

impl Tool for HangTool {
    fn spec() -> ToolSpec {
        ToolSpec::new("hang_tool", "Blocks for a while (test plugin).").parameters(
            serde_json::json!({
                "type": "object",
                "properties": { "seconds": { "type": "number" } },
                "additionalProperties": false
            }),
        )
    }

    fn call(_ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args: serde_json::Value = rojos_plugin_api::parse_args(args)?;
        let seconds = args
            .get("seconds")
            .and_then(|s| s.as_f64())
            .unwrap_or(3600.0);
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        Ok(serde_json::json!({ "slept": seconds }).to_string())
    }
}

export_tool!(HangTool);
