//! Test plugin built against plugin-api 0.2.0 (the same source under another version): the
//! host, built against 0.1, must refuse it and name both versions.

#![forbid(unsafe_code)]

use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};

/// A tool from the future.
#[derive(Debug)]
pub struct OtherVersion;

impl Tool for OtherVersion {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "other_version",
            "Built against another interface version (test plugin).",
        )
    }

    fn call(_ctx: &CallContext, _args: &str) -> Result<String, ToolError> {
        Ok("{}".to_owned())
    }
}

export_tool!(OtherVersion);
