//! The `create_directory` tool: create a folder and any missing parents.
//!
//! - Args: `{"path": "<relative folder path>"}`.
//! - Result: `{"ok":true}`, also when the folder already exists (or is an in-root symlink to
//!   a folder).
//! - Errors: `refused` (a file or other non-folder already has the name; a dangling link),
//!   `outside_root`, `invalid_arguments` (also control/bidi characters in new names).
//!   Logic in `rojos-fs-guard`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Creates a folder.
#[derive(Debug)]
pub struct CreateDirectory;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path of the folder, relative to the project root.
    pub path: String,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    dir.create_dir(&args.path)?;
    Ok(json!({ "ok": true }).to_string())
}

impl Tool for CreateDirectory {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "create_directory",
            "Create a folder in the project, with any missing parent folders. Succeeds if the \
             folder already exists. Paths are relative to the project root. Not needed before \
             write_text_content, which creates missing folders itself.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the folder relative to the project root, with '/' between folders, e.g. 'src/utils'"
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .creates_paths(&["path"])
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(CreateDirectory);

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, CREATE_DIR_ESCAPES,
    };
    use rojos_plugin_api::ErrorKind;

    fn mkdir(fx: &Fixture, path: &str) -> Result<String, ToolError> {
        run(
            &fx.project_dir(),
            Args {
                path: path.to_owned(),
            },
        )
    }

    #[test]
    fn a_folder_is_created_with_its_parents() {
        let fx = Fixture::new();
        assert_eq!(mkdir(&fx, "a/b/c").unwrap(), r#"{"ok":true}"#);
        assert!(fx.is_dir("a/b/c"));
        let deep = vec!["n"; 100].join("/");
        mkdir(&fx, &deep).unwrap();
        assert!(fx.is_dir(&deep));
    }

    #[test]
    fn an_existing_folder_is_fine() {
        let fx = Fixture::new();
        fx.plant_links();
        for path in [".", "./", "sub", "sub/deeper/", "in-dir", "sub/up-dir"] {
            assert_eq!(mkdir(&fx, path).unwrap(), r#"{"ok":true}"#, "{path}");
        }
    }

    #[test]
    fn an_existing_file_or_special_file_is_refused() {
        let fx = Fixture::new();
        fx.plant_links();
        fx.fifo("pipe");
        let cases = [
            (
                "hello.txt",
                "'hello.txt' already exists and is not a folder",
            ),
            ("in-file", "'in-file' already exists and is not a folder"),
            ("pipe", "'pipe' already exists and is not a folder"),
            (
                "hello.txt/x",
                "'hello.txt/x' is not a folder, or one of the folders on the way is a file",
            ),
        ];
        for (path, expected) in cases {
            let message = assert_refused(&fx, path, mkdir(&fx, path), &ErrorKind::REFUSED);
            assert_eq!(message, expected);
        }
    }

    #[test]
    fn hostile_paths_never_create_anything_outside() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (path, kind) in CREATE_DIR_ESCAPES {
            assert_refused(&fx, path, mkdir(&fx, path), kind);
        }
        fx.assert_outside_unchanged(&before);
        assert!(!rojos_fs_guard::testing::host_path_exists(
            "/tmp/rojos-escape-dir"
        ));
    }

    #[test]
    fn a_symlinked_parent_leading_out_is_refused_as_outside() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for path in [
            "rel-dir/made-outside",
            "abs-dir/made-outside",
            "chain-a/x/y",
        ] {
            let message = assert_refused(&fx, path, mkdir(&fx, path), &ErrorKind::OUTSIDE_ROOT);
            assert_eq!(
                message,
                format!(
                    "'{path}' leads outside the project: paths are relative to the project root"
                )
            );
        }
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn encoding_tricks_stay_literal_and_control_names_are_refused() {
        let fx = Fixture::new();
        let before = fx.snapshot_outside();
        for path in ["~", "%2e%2e", "\u{2025}", "\u{ff0e}\u{ff0e}", "a\u{2215}b"] {
            mkdir(&fx, path).unwrap();
            assert!(fx.is_dir(path), "{path}");
        }
        for path in ["tab\tdir", "rlo\u{202e}dir", "a\\b", &"n".repeat(256)] {
            assert_refused(&fx, path, mkdir(&fx, path), &ErrorKind::INVALID_ARGUMENTS);
        }
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        for (args, expected) in bad_path_arguments() {
            let error = call_tool::<CreateDirectory>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert_eq!(fx.names("."), ["hello.txt", "sub"]);
    }

    #[test]
    fn the_spec_takes_exactly_one_required_string_path() {
        let spec = CreateDirectory::spec();
        assert_eq!(spec.name, "create_directory");
        assert_eq!(spec.parameters["required"], json!(["path"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
    }
}
