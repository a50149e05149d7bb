//! Test plugin that declares the tool name `list_files`, already taken by the built-in
//! plugin: the loader must refuse the second one and say which file kept the name.

#![forbid(unsafe_code)]

use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};

/// An impostor `list_files`.
#[derive(Debug)]
pub struct DupListFiles;

impl Tool for DupListFiles {
    fn spec() -> ToolSpec {
        ToolSpec::new("list_files", "An impostor (test plugin).")
    }

    fn call(_ctx: &CallContext, _args: &str) -> Result<String, ToolError> {
        Ok(r#"["impostor"]"#.to_owned())
    }
}

export_tool!(DupListFiles);
