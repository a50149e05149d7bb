//! The `delete_path` tool: delete a file, a symlink, or (with `recursive`) a folder with
//! everything in it. Destructive.
//!
//! - Args: `{"path": "<relative path>", "recursive": false}`; `recursive` is optional and
//!   false by default.
//! - Result: `{"ok":true}`.
//! - A symlink is deleted as a link, never its target. A folder, even an empty one, needs
//!   `recursive: true`; the recursive delete never follows a symlink (a link inside is removed
//!   as a link, also when a folder is swapped for one while the delete runs) and does not
//!   enter other file systems mounted inside. FIFOs and devices are deleted without being
//!   opened. The project root itself cannot be deleted, also not as `a/..`.
//! - Errors: `refused` (a folder without `recursive`; the root; a path ending in `.` or `..`;
//!   a trailing `/` on something that is not a folder), `not_found`, `outside_root` (`..`,
//!   absolute, a symlink on the way that leads out), `invalid_arguments`. Logic in
//!   `rojos-fs-guard` (`ProjectDir::delete`, `ProjectDir::delete_recursive`).

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, PathError, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Deletes a file, link or folder.
#[derive(Debug)]
pub struct DeletePath;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path of the file or folder, relative to the project root.
    pub path: String,
    /// Delete a folder with everything in it.
    #[serde(default)]
    pub recursive: bool,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    if args.recursive {
        dir.delete_recursive(&args.path)?;
    } else {
        dir.delete(&args.path).map_err(|error| match error {
            PathError::IsADirectory { path } => {
                let mut error = ToolError::from(PathError::IsADirectory { path });
                error.message.push_str(
                    ": to delete it with everything in it, call delete_path again with \
                     \"recursive\": true",
                );
                error
            }
            other => other.into(),
        })?;
    }
    Ok(json!({ "ok": true }).to_string())
}

impl Tool for DeletePath {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "delete_path",
            "Delete a file in the project, or a folder with everything in it when 'recursive' \
             is true (a folder, even an empty one, is refused otherwise). A symbolic link is \
             deleted as a link; what it points to stays. The project root itself cannot be \
             deleted. Paths are relative to the project root. There is no undo.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the file or folder relative to the project root, e.g. 'notes/old.txt' or 'build'"
                },
                "recursive": {
                    "type": "boolean",
                    "description": "Set to true to delete a folder and everything in it (default false)"
                }
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .destructive()
        .changes_paths(&["path"])
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(DeletePath);

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, DELETE_ESCAPES,
    };
    use rojos_plugin_api::ErrorKind;

    fn delete(fx: &Fixture, path: &str, recursive: bool) -> Result<String, ToolError> {
        let args = Args {
            path: path.to_owned(),
            recursive,
        };
        run(&fx.project_dir(), args)
    }

    fn assert_root_intact(fx: &Fixture) {
        assert_eq!(fx.read("hello.txt"), b"hello");
        assert_eq!(fx.read("sub/inner.txt"), b"inner");
        assert!(fx.is_dir("sub/deeper"));
    }

    #[test]
    fn a_file_is_deleted_and_a_folder_only_with_recursive() {
        let fx = Fixture::new();
        fx.mkdir("empty");
        assert_eq!(delete(&fx, "hello.txt", false).unwrap(), r#"{"ok":true}"#);
        for folder in ["sub", "empty", "sub/deeper/"] {
            let message =
                assert_refused(&fx, folder, delete(&fx, folder, false), &ErrorKind::REFUSED);
            assert_eq!(
                message,
                format!(
                    "'{folder}' is a folder, not a file: to delete it with everything in it, \
                     call delete_path again with \"recursive\": true"
                )
            );
        }
        assert_eq!(delete(&fx, "sub", true).unwrap(), r#"{"ok":true}"#);
        delete(&fx, "empty/", true).unwrap();
        assert!(fx.names(".").is_empty());
        let message = assert_refused(&fx, "sub", delete(&fx, "sub", true), &ErrorKind::NOT_FOUND);
        assert_eq!(message, "'sub' does not exist");
    }

    #[test]
    fn hostile_paths_never_delete_anything_outside_or_the_root() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for recursive in [false, true] {
            for (path, kind) in DELETE_ESCAPES {
                assert_refused(&fx, path, delete(&fx, path, recursive), kind);
            }
        }
        fx.assert_outside_unchanged(&before);
        assert_root_intact(&fx);
    }

    #[test]
    fn the_root_itself_cannot_be_deleted_even_as_a_path_that_resolves_to_it() {
        let fx = Fixture::new();
        fx.plant_links();
        for path in [".", "./", "sub/..", "in-dir/..", "sub/up-dir/."] {
            for recursive in [false, true] {
                let message =
                    assert_refused(&fx, path, delete(&fx, path, recursive), &ErrorKind::REFUSED);
                assert_eq!(message, "the project root itself cannot be deleted");
            }
        }
        assert_root_intact(&fx);
    }

    #[test]
    fn deleting_a_symlink_removes_the_link_never_its_target() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (link, recursive) in [
            ("abs-dir", true),
            ("rel-dir", true),
            ("abs-file", false),
            ("rel-file", true),
            ("proc-root", true),
            ("dangling-out", false),
            ("loop-a", false),
            ("in-dir", true),
            ("sub/up-dir", true),
        ] {
            delete(&fx, link, recursive).unwrap();
            assert!(!fx.exists(link), "{link}");
        }
        fx.assert_outside_unchanged(&before);
        assert_root_intact(&fx);
    }

    #[test]
    fn a_recursive_delete_of_a_tree_with_links_out_deletes_nothing_outside() {
        let fx = Fixture::new();
        fx.write("tree/a/b/c.txt", b"c");
        fx.symlink("tree/out", "../../../../outside");
        fx.symlink("tree/a/abs", fx.outside());
        fx.symlink("tree/a/b/sub", "../../../sub");
        fx.fifo("tree/pipe");
        fx.hard_link_outside("tree/hard", "secret.txt");
        let before = fx.snapshot_outside();
        delete(&fx, "tree", true).unwrap();
        assert!(!fx.exists("tree"));
        fx.assert_outside_unchanged(&before);
        assert_root_intact(&fx);
    }

    #[test]
    fn a_fifo_is_deleted_without_blocking() {
        let fx = Fixture::new();
        fx.fifo("pipe");
        let dir = fx.project_dir();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let args = Args {
                path: "pipe".into(),
                recursive: false,
            };
            let _ = tx.send(run(&dir, args));
        });
        let result = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("deleting a FIFO blocked");
        assert_eq!(result.unwrap(), r#"{"ok":true}"#);
        assert!(!fx.exists("pipe"));
    }

    #[test]
    fn recursive_deletes_racing_a_folder_swapped_for_an_outside_link_delete_nothing_outside() {
        let fx = Fixture::new();
        let before = fx.snapshot_outside();
        let dir = fx.project_dir();
        let race = fx.race_tree_delete(200, false, |fx| {
            let args = Args {
                path: "victim".into(),
                recursive: true,
            };
            if let Err(error) = run(&dir, args) {
                fx.assert_clean(&error.message);
            }
        });
        assert_eq!(
            race.losses, 0,
            "files outside the root were deleted: {race:?}"
        );
        assert!(race.flips > 50, "the swapper barely ran: {race:?}");
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        let mut cases = bad_path_arguments();
        cases.extend(
            [
                (r#"{"path":"a","recursive":"yes"}"#, "invalid type: string"),
                (r#"{"path":"a","recursive":1}"#, "invalid type: integer"),
                (r#"{"path":"a","recursive":null}"#, "invalid type: null"),
                (r#"{"path":"a","force":true}"#, "unknown field `force`"),
                (
                    r#"{"path":"a","recursive":true,"recursive":false}"#,
                    "duplicate field `recursive`",
                ),
            ]
            .map(|(a, e)| (a.to_owned(), e)),
        );
        for (args, expected) in cases {
            let error = call_tool::<DeletePath>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert_root_intact(&fx);
        let ok = call_tool::<DeletePath>(&fx, r#"{"path":"sub","recursive":true}"#).unwrap();
        assert_eq!(ok, r#"{"ok":true}"#);
        call_tool::<DeletePath>(&fx, r#"{"path":"hello.txt"}"#).unwrap();
        assert!(fx.names(".").is_empty());
    }

    #[test]
    fn the_spec_is_destructive_with_an_optional_boolean_recursive() {
        let spec = DeletePath::spec();
        assert_eq!(spec.name, "delete_path");
        assert!(spec.destructive);
        assert_eq!(spec.parameters["required"], json!(["path"]));
        assert_eq!(
            spec.parameters["properties"]["recursive"]["type"],
            "boolean"
        );
        assert_eq!(spec.parameters["additionalProperties"], false);
    }
}
