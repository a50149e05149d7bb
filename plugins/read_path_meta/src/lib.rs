//! The `read_path_meta` tool: type, size and modification time of a file or folder.
//!
//! - Args: `{"path": "<relative path>"}` (`.` is the project root).
//! - Result: `{"type":"file"|"directory","size":N,"modifiedAt":"2026-04-20T10:11:12Z"}`
//!   (RFC 3339, UTC, whole seconds; in-root symlinks are followed).
//! - Errors: `not_found`, `outside_root` (absolute, `..` above the root, links leading out),
//!   `refused` (FIFO, socket, device, symlink loop), `invalid_arguments`. Logic in `rojos-fs-guard`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Reports what a path in the project is.
#[derive(Debug)]
pub struct ReadPathMeta;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path relative to the project root.
    pub path: String,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    let meta = dir.meta(&args.path)?;
    Ok(json!(meta).to_string())
}

impl Tool for ReadPathMeta {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "read_path_meta",
            "Tell whether a path in the project is a file or a folder, with its size in bytes and \
             last modification time (RFC 3339, UTC). Paths are relative to the project root; use \
             '.' for the root itself. Use it to check that something exists before reading it.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path relative to the project root, with '/' between folders, e.g. 'src/main.rs' or '.'"
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }))
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(ReadPathMeta);

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, READ_ESCAPES,
    };
    use rojos_plugin_api::ErrorKind;
    use serde_json::Value;

    fn meta(fx: &Fixture, path: &str) -> Result<String, ToolError> {
        run(
            &fx.project_dir(),
            Args {
                path: path.to_owned(),
            },
        )
    }

    #[test]
    fn a_file_is_reported_with_type_size_and_utc_time() {
        let fx = Fixture::new();
        let result: Value = serde_json::from_str(&meta(&fx, "hello.txt").unwrap()).unwrap();
        let object = result.as_object().unwrap();
        assert_eq!(object.len(), 3, "{result}");
        assert_eq!(result["type"], "file");
        assert_eq!(result["size"], 5);
        let at = result["modifiedAt"].as_str().unwrap();
        assert!(
            at.len() == 20 && at.starts_with("20") && at.ends_with('Z'),
            "{at}"
        );
    }

    #[test]
    fn a_folder_and_the_root_are_directories() {
        let fx = Fixture::new();
        for path in [".", "sub", "sub/", "./sub/deeper"] {
            let result: Value = serde_json::from_str(&meta(&fx, path).unwrap()).unwrap();
            assert_eq!(result["type"], "directory", "{path}");
        }
    }

    #[test]
    fn in_root_symlinks_report_their_target() {
        let fx = Fixture::new();
        fx.plant_links();
        let result: Value = serde_json::from_str(&meta(&fx, "in-chain").unwrap()).unwrap();
        assert_eq!(
            (result["type"].as_str(), result["size"].as_u64()),
            (Some("file"), Some(5))
        );
        let result: Value = serde_json::from_str(&meta(&fx, "in-dir").unwrap()).unwrap();
        assert_eq!(result["type"], "directory");
    }

    #[test]
    fn hostile_paths_are_refused_without_revealing_anything_outside() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (path, kind) in READ_ESCAPES {
            assert_refused(&fx, path, meta(&fx, path), kind);
        }
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn special_files_are_refused_saying_what_they_are() {
        let fx = Fixture::new();
        fx.plant_links();
        fx.fifo("pipe");
        let message = assert_refused(&fx, "pipe", meta(&fx, "pipe"), &ErrorKind::REFUSED);
        assert_eq!(
            message,
            "'pipe' is a FIFO (named pipe), not a regular file or folder"
        );
        if fx.char_device("null") {
            let message = assert_refused(&fx, "null", meta(&fx, "null"), &ErrorKind::REFUSED);
            assert_eq!(
                message,
                "'null' is a character device, not a regular file or folder"
            );
        }
        let message = assert_refused(&fx, "loop-a", meta(&fx, "loop-a"), &ErrorKind::REFUSED);
        assert_eq!(message, "'loop-a': too many levels of symbolic links");
    }

    #[test]
    fn a_fifty_mib_file_is_described_not_read() {
        let fx = Fixture::new();
        fx.sized_file("big.bin", 50 << 20);
        let result: Value = serde_json::from_str(&meta(&fx, "big.bin").unwrap()).unwrap();
        assert_eq!(result["size"], 50 << 20);
    }

    #[test]
    fn metadata_racing_a_folder_swapped_for_an_outside_link_never_describes_the_outside() {
        let fx = Fixture::new();
        let dir = fx.project_dir();
        let swapper = fx.start_race();
        let mut inside = 0;
        for _ in 0..5_000 {
            match run(
                &dir,
                Args {
                    path: "swap/secret.txt".into(),
                },
            ) {
                Ok(text) => {
                    let result: Value = serde_json::from_str(&text).unwrap();
                    let size = rojos_fs_guard::testing::RACE_INSIDE.len();
                    assert_eq!(result["size"], size, "described another file: {text}");
                    inside += 1;
                }
                Err(error) => fx.assert_clean(&error.message),
            }
        }
        assert!(swapper.stop() > 100, "the swapper barely ran");
        assert!(inside > 50, "too few calls saw the inside file: {inside}");
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        for (args, expected) in bad_path_arguments() {
            let error = call_tool::<ReadPathMeta>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        let ok = call_tool::<ReadPathMeta>(&fx, r#"{"path":"hello.txt"}"#).unwrap();
        assert!(ok.contains(r#""type":"file""#), "{ok}");
    }

    #[test]
    fn the_spec_takes_exactly_one_required_string_path() {
        let spec = ReadPathMeta::spec();
        assert_eq!(spec.name, "read_path_meta");
        assert_eq!(spec.parameters["required"], json!(["path"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
        assert_eq!(spec.parameters["properties"]["path"]["type"], "string");
        assert!(!spec.destructive);
    }
}
