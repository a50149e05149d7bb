//! Test plugin `panic_tool`: panics on every call, to show the panic is caught inside the
//! plugin and reaches the model as an error result while the host keeps serving.

#![forbid(unsafe_code)]

use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};

/// Panics with the message given in `message`.
#[derive(Debug)]
pub struct PanicTool;

impl Tool for PanicTool {
    fn spec() -> ToolSpec {
        ToolSpec::new("panic_tool", "Always panics (test plugin).")
    }

    fn call(_ctx: &CallContext, _args: &str) -> Result<String, ToolError> {
        panic!("deliberate test panic")
    }
}

export_tool!(PanicTool);
