//! The `write_text_content` tool: create or replace a text file, atomically.
//!
//! - Args: `{"path": "<relative path>", "text": "<the whole new content>",
//!   "expected_version": "<optional: the version get_text_content returned>"}`.
//! - Result: `{"ok":true}`. Missing parent folders are created; an existing file keeps its
//!   mode; the file is never seen half-written (temp file, sync, rename, folder sync). With
//!   `expected_version`, the file is replaced only if it still holds the content of that
//!   version, and the result is `{"ok":true,"version":"<the new text's version>"}`
//!   (docs/tools.md, "Stale writes").
//! - Errors: `stale` (the file changed or vanished since that version), `too_large` (text over `max_write_bytes`), `outside_root`, `refused` (a folder,
//!   FIFO, device or symlink at the name; an in-root symlink's target is named), `not_found`,
//!   `invalid_arguments` (also control/bidi characters in names). Logic in `rojos-fs-guard`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ContentVersion, IfExists, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Writes a text file.
#[derive(Debug)]
pub struct WriteTextContent;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path of the file, relative to the project root.
    pub path: String,
    /// The complete new content.
    pub text: String,
    /// The version the model read (`get_text_content` with `with_version`): the write is
    /// refused unless the file still has it.
    #[serde(default)]
    pub expected_version: Option<String>,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    let Some(expected) = args.expected_version else {
        dir.write_text(&args.path, &args.text)?;
        return Ok(json!({ "ok": true }).to_string());
    };
    let expected = ContentVersion::parse(&expected)
        .map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
    let bytes = args.text.as_bytes();
    dir.write_bytes(&args.path, bytes, IfExists::ReplaceIfVersion(expected))?;
    let version = ContentVersion::of(bytes).to_string();
    Ok(json!({ "ok": true, "version": version }).to_string())
}

impl Tool for WriteTextContent {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "write_text_content",
            "Create a text file in the project, or replace an existing file's whole content. \
             Paths are relative to the project root; missing folders on the way are created. \
             The write is all-or-nothing. Text over the write limit (1 MiB by default) is \
             refused. Existing folders and symbolic links are never overwritten. To replace a \
             file you read, give the version get_text_content returned (with_version: true) as \
             expected_version: if the file changed since, the write is refused and you should \
             read it again and redo your change on the current text.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the file relative to the project root, with '/' between folders, e.g. 'src/lib.rs'"
                },
                "text": {
                    "type": "string",
                    "description": "The complete new content of the file, as UTF-8 text"
                },
                "expected_version": {
                    "type": "string",
                    "description": "Optional: the version get_text_content returned (with_version: true) when you read this file; the write is refused if the file changed since. Leave it out to create a file or replace it whatever it holds"
                }
            },
            "required": ["path", "text"],
            "additionalProperties": false
        }))
        .changes_paths(&["path"])
    }

    fn call(ctx: &CallContext, args: &str) -> Result<String, ToolError> {
        let args = parse_args(args)?;
        let dir = ProjectDir::from_context(ctx)?;
        run(&dir, args)
    }
}

export_tool!(WriteTextContent);

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, WRITE_ESCAPES,
    };
    use rojos_plugin_api::{ErrorKind, Limits};

    fn write(fx: &Fixture, path: &str, text: &str) -> Result<String, ToolError> {
        let args = Args {
            path: path.to_owned(),
            text: text.to_owned(),
            expected_version: None,
        };
        run(&fx.project_dir(), args)
    }

    #[test]
    fn a_new_file_is_written_with_its_parents_and_ok_is_returned() {
        let fx = Fixture::new();
        assert_eq!(write(&fx, "a/b/c.txt", "abc\n").unwrap(), r#"{"ok":true}"#);
        assert_eq!(fx.read("a/b/c.txt"), b"abc\n");
        assert_eq!(write(&fx, "empty.txt", "").unwrap(), r#"{"ok":true}"#);
        assert_eq!(fx.read("empty.txt"), b"");
    }

    #[test]
    fn an_expected_version_replaces_the_file_it_names_and_refuses_a_changed_one() {
        let fx = Fixture::new();
        let read = ContentVersion::of(b"hello").to_string();
        let args = json!({"path": "hello.txt", "text": "first edit", "expected_version": read});
        let result = call_tool::<WriteTextContent>(&fx, &args.to_string()).unwrap();
        let new_version = ContentVersion::of(b"first edit").to_string();
        assert_eq!(
            result,
            json!({"ok": true, "version": new_version}).to_string()
        );
        assert_eq!(fx.read("hello.txt"), b"first edit");
        // The old version no longer matches: a second write from the same read is stale.
        let error = call_tool::<WriteTextContent>(&fx, &args.to_string()).unwrap_err();
        assert_eq!(error.kind, ErrorKind::STALE);
        assert!(
            error.message.contains("changed since you read it"),
            "{}",
            error.message
        );
        assert_eq!(fx.read("hello.txt"), b"first edit");
        // The version the write returned chains the next write.
        let next = json!({"path": "hello.txt", "text": "second", "expected_version": new_version});
        call_tool::<WriteTextContent>(&fx, &next.to_string()).unwrap();
        assert_eq!(fx.read("hello.txt"), b"second");
    }

    #[test]
    fn a_create_only_path_is_created_but_never_replaced() {
        let fx = Fixture::new();
        let ctx = fx.context().create_only(&["hello.txt", "new/made.txt"]);
        let error =
            WriteTextContent::call(ctx.ctx(), r#"{"path":"hello.txt","text":"x"}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::REFUSED);
        assert!(
            error
                .message
                .contains("did not exist when this call was checked")
                && error.message.contains("Call again to be asked"),
            "{}",
            error.message
        );
        assert_eq!(fx.read("hello.txt"), b"hello");
        WriteTextContent::call(ctx.ctx(), r#"{"path":"new/made.txt","text":"made"}"#).unwrap();
        assert_eq!(fx.read("new/made.txt"), b"made");
        // A path the host did not name is written as always.
        WriteTextContent::call(ctx.ctx(), r#"{"path":"sub/inner.txt","text":"y"}"#).unwrap();
        assert_eq!(fx.read("sub/inner.txt"), b"y");
    }

    #[test]
    fn a_malformed_expected_version_is_an_invalid_argument_and_nothing_is_written() {
        let fx = Fixture::new();
        let args = r#"{"path":"hello.txt","text":"x","expected_version":"v1"}"#;
        let error = call_tool::<WriteTextContent>(&fx, args).unwrap_err();
        assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS);
        assert!(error.message.contains("16 hex digits"), "{}", error.message);
        assert_eq!(fx.read("hello.txt"), b"hello");
    }

    #[test]
    fn an_existing_file_is_replaced_keeping_its_mode_and_no_temp_file_remains() {
        let fx = Fixture::new();
        fx.chmod("sub/inner.txt", 0o600);
        write(&fx, "sub/inner.txt", "replaced").unwrap();
        assert_eq!(fx.read("sub/inner.txt"), b"replaced");
        assert_eq!(fx.mode("sub/inner.txt"), 0o600);
        assert_eq!(fx.names("sub"), ["deeper", "inner.txt"]);
        assert_eq!(fx.names("."), ["hello.txt", "sub"]);
    }

    #[test]
    fn hostile_paths_never_create_or_change_anything_outside() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (path, kind) in WRITE_ESCAPES {
            assert_refused(&fx, path, write(&fx, path, "pwned"), kind);
        }
        fx.assert_outside_unchanged(&before);
        assert!(!rojos_fs_guard::testing::host_path_exists(
            "/tmp/rojos-escape.txt"
        ));
    }

    #[test]
    fn a_dangling_symlink_is_never_written_through() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for path in ["dangling-out", "dangling-abs", "dangling-in"] {
            let message = assert_refused(&fx, path, write(&fx, path, "x"), &ErrorKind::REFUSED);
            assert!(message.contains("is a symbolic link"), "{message}");
        }
        fx.assert_outside_unchanged(&before);
        assert!(!fx.exists("missing.txt"));
    }

    #[test]
    fn writing_over_a_symlink_folder_or_fifo_is_refused() {
        let fx = Fixture::new();
        fx.plant_links();
        fx.fifo("pipe");
        let message = assert_refused(
            &fx,
            "in-file",
            write(&fx, "in-file", "x"),
            &ErrorKind::REFUSED,
        );
        assert_eq!(
            message,
            "'in-file' is a symbolic link to 'hello.txt': write to 'hello.txt' instead"
        );
        let message = assert_refused(&fx, "sub", write(&fx, "sub", "x"), &ErrorKind::REFUSED);
        assert_eq!(message, "'sub' is a folder, not a file");
        let (tx, rx) = mpsc::channel();
        let dir = fx.project_dir();
        std::thread::spawn(move || {
            let _ = tx.send(run(
                &dir,
                Args {
                    path: "pipe".into(),
                    text: "x".into(),
                    expected_version: None,
                },
            ));
        });
        let result = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("write to a FIFO blocked");
        assert_refused(&fx, "pipe", result, &ErrorKind::REFUSED);
        assert_eq!(fx.read("hello.txt"), b"hello");
    }

    #[test]
    fn a_write_to_a_planted_hard_link_replaces_the_name_only() {
        let fx = Fixture::new();
        fx.hard_link_outside("linked.txt", "secret.txt");
        let before = fx.snapshot_outside();
        write(&fx, "linked.txt", "mine now").unwrap();
        assert_eq!(fx.read("linked.txt"), b"mine now");
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn a_five_mib_text_is_refused_and_the_limit_comes_from_the_context() {
        let fx = Fixture::new();
        let big = "x".repeat(5 << 20);
        let message = assert_refused(
            &fx,
            "big",
            write(&fx, "big.txt", &big),
            &ErrorKind::TOO_LARGE,
        );
        assert_eq!(
            message,
            "text is 5242880 bytes, over the write limit of 1048576 bytes"
        );
        assert!(!fx.exists("big.txt"));
        let ctx = fx.context_with(Limits {
            max_write_bytes: 3,
            ..Limits::default()
        });
        let error = WriteTextContent::call(ctx.ctx(), r#"{"path":"a","text":"four"}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::TOO_LARGE);
        WriteTextContent::call(ctx.ctx(), r#"{"path":"a","text":"три"}"#).unwrap_err();
        WriteTextContent::call(ctx.ctx(), r#"{"path":"a","text":"abc"}"#).unwrap();
    }

    #[test]
    fn long_paths_long_names_and_deep_nesting_behave() {
        let fx = Fixture::new();
        assert_refused(
            &fx,
            "long",
            write(&fx, &"d/".repeat(2100), "x"),
            &ErrorKind::INVALID_ARGUMENTS,
        );
        assert_refused(
            &fx,
            "name",
            write(&fx, &"n".repeat(256), "x"),
            &ErrorKind::INVALID_ARGUMENTS,
        );
        let deep = format!("{}/leaf.txt", vec!["n"; 100].join("/"));
        write(&fx, &deep, "deep").unwrap();
        assert_eq!(fx.read(&deep), b"deep");
    }

    #[test]
    fn control_and_bidi_characters_are_refused_in_new_names() {
        let fx = Fixture::new();
        for name in [
            "a\u{1}b",
            "line\nbreak",
            "del\u{7f}",
            "c1\u{9b}",
            "rlo\u{202e}txt.exe",
            "\u{2067}x",
            "dir\u{202a}/x",
        ] {
            let message = assert_refused(
                &fx,
                name,
                write(&fx, name, "x"),
                &ErrorKind::INVALID_ARGUMENTS,
            );
            assert!(
                message.contains("new names may not contain control, invisible or bidirectional"),
                "{message}"
            );
        }
        assert_eq!(fx.names("."), ["hello.txt", "sub"]);
    }

    #[test]
    fn literal_encoding_tricks_create_names_inside_the_root() {
        let fx = Fixture::new();
        let before = fx.snapshot_outside();
        for path in [
            "~/x",
            "%2e%2e/x",
            "\u{2025}/x",
            "\u{ff0e}\u{ff0e}/x",
            "..\u{2215}x",
        ] {
            write(&fx, path, "literal").unwrap();
            assert_eq!(fx.read(path), b"literal");
        }
        assert_refused(
            &fx,
            "bs",
            write(&fx, "..\\x", "x"),
            &ErrorKind::INVALID_ARGUMENTS,
        );
        assert_refused(
            &fx,
            "drive",
            write(&fx, "C:\\x", "x"),
            &ErrorKind::OUTSIDE_ROOT,
        );
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        let mut cases = bad_path_arguments();
        cases.extend(
            [
                (r#"{"path":"a"}"#, "missing field `text`"),
                (r#"{"text":"a"}"#, "missing field `path`"),
                (r#"{"path":"a","text":5}"#, "invalid type: integer"),
                (r#"{"path":"a","text":null}"#, "invalid type: null"),
                (r#"{"path":"a","text":["x"]}"#, "invalid type: sequence"),
                (r#"{"path":"a","text":{"x":1}}"#, "invalid type: map"),
                (
                    r#"{"path":"a","text":"x","mode":"0777"}"#,
                    "unknown field `mode`",
                ),
                (
                    r#"{"path":"a","text":"x","text":"y"}"#,
                    "duplicate field `text`",
                ),
                (r#"{"path":"a","text":"\ud800"}"#, "hex escape"),
                (r#"["a","x"]"#, "expected a JSON object"),
            ]
            .map(|(a, e)| (a.to_owned(), e)),
        );
        for (args, expected) in cases {
            let error = call_tool::<WriteTextContent>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert_eq!(fx.names("."), ["hello.txt", "sub"]);
        let ok = call_tool::<WriteTextContent>(&fx, r#"{"path":"new.txt","text":"hi"}"#).unwrap();
        assert_eq!(ok, r#"{"ok":true}"#);
    }

    #[test]
    fn the_spec_requires_path_and_text_strings() {
        let spec = WriteTextContent::spec();
        assert_eq!(spec.name, "write_text_content");
        assert_eq!(spec.parameters["required"], json!(["path", "text"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
        assert_eq!(spec.parameters["properties"]["text"]["type"], "string");
    }
}
