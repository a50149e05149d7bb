//! `my_tool`: a template for your own Rojos tool. It counts the lines of a text file in the
//! project; replace the arguments, [`run`] and the spec with your own tool.
//!
//! - Args: `{"path": "<relative file path>"}`.
//! - Result: `{"lines": N, "bytes": N}`.
//! - Errors: `not_found`, `outside_root`, `refused` (a folder, FIFO, device), `too_large`,
//!   `not_text`, `invalid_arguments`.
//!
//! Reach files only through [`ProjectDir`] (from `rojos-fs-guard`): every path the model
//! gives is resolved beneath the project root by the kernel, so `..`, absolute paths and
//! symlinks that lead out are refused, and its errors name only the model's own path.
//! `clippy.toml` forbids `std::fs` here.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// The tool. The name the model calls is in [`Tool::spec`].
#[derive(Debug)]
pub struct MyTool;

/// The tool's arguments. `deny_unknown_fields` makes a misspelt key an error the model reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path of the file, relative to the project root.
    pub path: String,
}

/// Runs the tool on an open project (the logic, tested without the plugin boundary).
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    let text = dir.read_text(&args.path)?;
    Ok(json!({ "lines": text.lines().count(), "bytes": text.len() }).to_string())
}

impl Tool for MyTool {
    fn spec() -> ToolSpec {
        // Written for the model: what the tool does, what it returns, when to use it.
        ToolSpec::new(
            "my_tool",
            "Count the lines of a text file in the project. Returns {lines, bytes}. Paths are \
             relative to the project root.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the file relative to the project root, e.g. 'src/main.rs'"
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        // Add `.destructive()` if the tool deletes, moves or overwrites anything.
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(MyTool);

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, READ_ESCAPES,
    };
    use rojos_plugin_api::ErrorKind;

    fn count(fx: &Fixture, path: &str) -> Result<String, ToolError> {
        run(
            &fx.project_dir(),
            Args {
                path: path.to_owned(),
            },
        )
    }

    #[test]
    fn the_lines_of_a_file_are_counted() {
        let fx = Fixture::new();
        fx.write("three.txt", b"one\ntwo\r\nthree");
        assert_eq!(
            count(&fx, "three.txt").unwrap(),
            r#"{"bytes":14,"lines":3}"#
        );
    }

    /// The hostile read paths of `rojos_fs_guard::testing` (`READ_ESCAPES`: `..`, absolute
    /// paths, symlinks leading out, ...): every one is refused, and nothing outside the root
    /// (where every file holds a leak marker) reaches the result or the message.
    #[test]
    fn hostile_paths_are_refused_and_leak_nothing() {
        let fx = Fixture::new();
        fx.plant_links();
        for (path, kind) in READ_ESCAPES {
            assert_refused(&fx, path, count(&fx, path), kind);
        }
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        for (args, expected) in bad_path_arguments() {
            let error = call_tool::<MyTool>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert_eq!(
            call_tool::<MyTool>(&fx, r#"{"path":"hello.txt"}"#).unwrap(),
            r#"{"bytes":5,"lines":1}"#
        );
    }

    #[test]
    fn the_spec_requires_a_string_path() {
        let spec = MyTool::spec();
        assert_eq!(spec.name, "my_tool");
        assert!(!spec.destructive);
        assert_eq!(spec.parameters["required"], json!(["path"]));
    }
}
