//! The `move_path` tool: rename or move a file or folder inside the project. Destructive.
//!
//! - Args: `{"from": "<relative path>", "to": "<relative path>"}`. `to` is the full new
//!   path, not a folder to move into; its folder must exist. A trailing `/` on either says
//!   the source must be a folder.
//! - Result: `{"ok":true}`.
//! - Never replaces anything: an existing `to` (file, folder, even an empty one, or symlink)
//!   is refused, in the same `renameat2(RENAME_NOREPLACE)` call that moves, so there is no
//!   check-then-act window. A symlink is moved as a link; its target is not touched.
//! - Errors: `refused` (`to` exists, saying how to move into it when it is a folder; its
//!   folder is missing; a folder moved into itself; the root itself, also as `a/..`),
//!   `not_found`, `outside_root` (either path leads out: `..`, absolute, a symlink on the
//!   way), `invalid_arguments` (also control/bidi characters in `to`). Logic in
//!   `rojos-fs-guard` (`ProjectDir::rename`).

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Moves or renames a file or folder.
#[derive(Debug)]
pub struct MovePath;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The file or folder to move, relative to the project root.
    pub from: String,
    /// Its new path, relative to the project root.
    pub to: String,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    dir.rename(&args.from, &args.to)?;
    Ok(json!({ "ok": true }).to_string())
}

impl Tool for MovePath {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "move_path",
            "Move or rename a file or folder in the project (a folder moves with everything in \
             it). 'to' is the full new path, not a folder to move into: to move 'a.txt' into \
             'docs', give 'docs/a.txt'. Never replaces anything: fails if 'to' already exists. \
             The folder of 'to' must exist (create it with create_directory). Paths are \
             relative to the project root.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "from": {
                    "type": "string",
                    "description": "Path of the file or folder to move, relative to the project root, e.g. 'notes/draft.txt'"
                },
                "to": {
                    "type": "string",
                    "description": "Its new path, relative to the project root, e.g. 'notes/final.txt' or 'archive/draft.txt'"
                }
            },
            "required": ["from", "to"],
            "additionalProperties": false
        }))
        .destructive()
        .changes_paths(&["from", "to"])
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(MovePath);

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, call_tool, host_path_exists, Fixture, DELETE_ESCAPES, MOVE_DEST_ESCAPES,
    };
    use rojos_plugin_api::ErrorKind;

    fn mv(fx: &Fixture, from: &str, to: &str) -> Result<String, ToolError> {
        let args = Args {
            from: from.to_owned(),
            to: to.to_owned(),
        };
        run(&fx.project_dir(), args)
    }

    fn assert_root_intact(fx: &Fixture) {
        assert_eq!(fx.read("hello.txt"), b"hello");
        assert_eq!(fx.read("sub/inner.txt"), b"inner");
        assert!(fx.is_dir("sub/deeper"));
    }

    #[test]
    fn a_file_is_renamed_and_a_folder_moved_with_its_content() {
        let fx = Fixture::new();
        assert_eq!(mv(&fx, "hello.txt", "hi.txt").unwrap(), r#"{"ok":true}"#);
        assert_eq!(fx.read("hi.txt"), b"hello");
        fx.mkdir("archive");
        mv(&fx, "sub", "archive/sub").unwrap();
        mv(&fx, "hi.txt", "archive/sub/deeper/hi.txt").unwrap();
        assert_eq!(fx.names("."), ["archive"]);
        assert_eq!(fx.read("archive/sub/inner.txt"), b"inner");
        assert_eq!(fx.read("archive/sub/deeper/hi.txt"), b"hello");
        mv(&fx, "archive/sub/", "sub/").unwrap();
        assert_eq!(fx.names("sub"), ["deeper", "inner.txt"]);
    }

    #[test]
    fn hostile_sources_never_move_anything_in_from_outside() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (from, kind) in DELETE_ESCAPES {
            assert_refused(&fx, from, mv(&fx, from, "stolen"), kind);
        }
        fx.assert_outside_unchanged(&before);
        assert!(!fx.exists("stolen"));
        assert_root_intact(&fx);
    }

    #[test]
    fn hostile_destinations_never_move_anything_out_or_replace_anything() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for from in ["hello.txt", "sub", "sub/inner.txt", "in-file"] {
            for (to, kind) in MOVE_DEST_ESCAPES {
                assert_refused(&fx, to, mv(&fx, from, to), kind);
            }
        }
        fx.assert_outside_unchanged(&before);
        assert!(!host_path_exists("/tmp/rojos-escape-moved"));
        assert_root_intact(&fx);
        assert!(fx.exists("in-file"));
    }

    #[test]
    fn overwriting_a_file_or_a_folder_is_refused_with_a_hint() {
        let fx = Fixture::new();
        fx.mkdir("empty");
        let cases = [
            (
                "hello.txt",
                "sub/inner.txt",
                "'sub/inner.txt' already exists; moving never replaces anything: delete it \
                 first or choose another name",
            ),
            (
                "sub",
                "empty",
                "'empty' already exists and is a folder; moving never replaces anything: to \
                 move into that folder, give the full new path, such as 'empty/sub'",
            ),
            (
                "hello.txt",
                "sub",
                "'sub' already exists and is a folder; moving never replaces anything: to move \
                 into that folder, give the full new path, such as 'sub/hello.txt'",
            ),
        ];
        for (from, to, expected) in cases {
            let message = assert_refused(&fx, to, mv(&fx, from, to), &ErrorKind::REFUSED);
            assert_eq!(message, expected);
        }
        assert_root_intact(&fx);
        assert!(fx.names("empty").is_empty());
    }

    #[test]
    fn a_symlink_leading_out_is_moved_as_a_link_and_its_target_stays() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        mv(&fx, "rel-dir", "sub/rel-dir").unwrap();
        mv(&fx, "abs-file", "sub/deeper/abs-file").unwrap();
        fx.assert_outside_unchanged(&before);
        assert!(fx.exists("sub/rel-dir") && !fx.exists("rel-dir"));
        // Moving through the moved link is still refused.
        assert_refused(
            &fx,
            "sub/rel-dir/x",
            mv(&fx, "sub/rel-dir/x", "x"),
            &ErrorKind::OUTSIDE_ROOT,
        );
    }

    #[test]
    fn the_root_and_a_folder_into_itself_are_refused() {
        let fx = Fixture::new();
        fx.plant_links();
        for from in [".", "./", "sub/..", "in-dir/.."] {
            let message = assert_refused(&fx, from, mv(&fx, from, "x"), &ErrorKind::REFUSED);
            assert_eq!(message, "the project root itself cannot be moved");
        }
        let message = assert_refused(
            &fx,
            "sub",
            mv(&fx, "sub", "sub/deeper/sub"),
            &ErrorKind::REFUSED,
        );
        assert_eq!(
            message,
            "'sub' cannot be moved into itself ('sub/deeper/sub')"
        );
        let message = assert_refused(
            &fx,
            "x",
            mv(&fx, "hello.txt", "new/hello.txt"),
            &ErrorKind::REFUSED,
        );
        assert_eq!(
            message,
            "'new/hello.txt': the folder 'new' does not exist; create it first"
        );
        assert_root_intact(&fx);
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        let cases = [
            ("{}", "missing field `from`"),
            (r#"{"from":"hello.txt"}"#, "missing field `to`"),
            (r#"{"to":"x"}"#, "missing field `from`"),
            (r#"{"from":1,"to":"x"}"#, "invalid type: integer"),
            (r#"{"from":"hello.txt","to":null}"#, "invalid type: null"),
            (
                r#"{"from":["hello.txt"],"to":"x"}"#,
                "invalid type: sequence",
            ),
            (
                r#"{"from":"hello.txt","to":"x","overwrite":true}"#,
                "unknown field `overwrite`",
            ),
            (r#"{"path":"hello.txt"}"#, "unknown field `path`"),
            (
                r#"{"from":"hello.txt","to":"x","to":"y"}"#,
                "duplicate field `to`",
            ),
            (r#"{"from":"\ud800","to":"x"}"#, "hex escape"),
            (r#"["hello.txt","x"]"#, "expected a JSON object"),
            ("not json", "expected a JSON object"),
        ];
        for (args, expected) in cases {
            let error = call_tool::<MovePath>(&fx, args).expect_err(args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args}");
            assert!(
                error.message.contains(expected),
                "{args}: {}",
                error.message
            );
        }
        assert_root_intact(&fx);
        let ok = call_tool::<MovePath>(&fx, r#"{"from":"hello.txt","to":"x.txt"}"#).unwrap();
        assert_eq!(ok, r#"{"ok":true}"#);
    }

    #[test]
    fn the_spec_is_destructive_and_requires_from_and_to() {
        let spec = MovePath::spec();
        assert_eq!(spec.name, "move_path");
        assert!(spec.destructive);
        assert_eq!(spec.parameters["required"], json!(["from", "to"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
    }
}
