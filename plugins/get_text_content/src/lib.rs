//! The `get_text_content` tool: the text of a file in the project, verbatim.
//!
//! - Args: `{"path": "<relative path>", "with_version": <optional bool, default false>}`.
//! - Result: the file's UTF-8 text exactly as stored (not wrapped in JSON); with
//!   `"with_version": true`, `{"text": "<the text>", "version": "<16 hex digits>"}`, the version
//!   `write_text_content` takes as `expected_version` (docs/tools.md, "Stale writes").
//! - Errors: `not_found`, `outside_root`, `refused` (folder, FIFO, socket, device, loop),
//!   `too_large` (over `max_read_bytes`, size and limit named), `not_text` (NUL bytes or
//!   invalid UTF-8, offset named), `invalid_arguments`. Logic in `rojos-fs-guard`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{parse_args, ContentVersion, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Returns a text file's content.
#[derive(Debug)]
pub struct GetTextContent;

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Path of the file, relative to the project root.
    pub path: String,
    /// Return the text with its version, as a JSON object.
    #[serde(default)]
    pub with_version: bool,
}

/// Runs the tool on an open project.
///
/// # Errors
///
/// See the crate documentation.
pub fn run(dir: &ProjectDir, args: Args) -> Result<String, ToolError> {
    let text = dir.read_text(&args.path)?;
    if !args.with_version {
        return Ok(text);
    }
    let version = ContentVersion::of(text.as_bytes()).to_string();
    Ok(json!({ "text": text, "version": version }).to_string())
}

impl Tool for GetTextContent {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "get_text_content",
            "Read a UTF-8 text file in the project and return its content exactly as stored. \
             Paths are relative to the project root. Files over the read limit (1 MiB by \
             default), binary files and folders are refused with an error saying why; use \
             read_path_meta to check a file's size first and list_files to find files. \
             When you may change the file afterwards, set with_version to true: the result is \
             then {\"text\": ..., \"version\": ...}; give that version as expected_version to \
             write_text_content, so your write is refused instead of overwriting changes made \
             since you read it.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the file relative to the project root, with '/' between folders, e.g. 'src/main.rs'"
                },
                "with_version": {
                    "type": "boolean",
                    "description": "true: return {\"text\": ..., \"version\": ...} instead of the bare text, to pass the version to write_text_content as expected_version (default false)"
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

export_tool!(GetTextContent);

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, LEAK_MARKER, RACE_INSIDE,
        READ_ESCAPES,
    };
    use rojos_plugin_api::{ErrorKind, Limits};

    fn read(fx: &Fixture, path: &str) -> Result<String, ToolError> {
        run(
            &fx.project_dir(),
            Args {
                path: path.to_owned(),
                with_version: false,
            },
        )
    }

    #[test]
    fn with_version_the_text_comes_with_the_version_of_its_bytes() {
        let fx = Fixture::new();
        let text = "line one\r\n\"quoted\" ünïcödé\n";
        fx.write("notes.md", text.as_bytes());
        let result =
            call_tool::<GetTextContent>(&fx, r#"{"path":"notes.md","with_version":true}"#).unwrap();
        let result: serde_json::Value = serde_json::from_str(&result).unwrap();
        assert_eq!(result["text"], text);
        assert_eq!(
            result["version"],
            ContentVersion::of(text.as_bytes()).to_string()
        );
        assert_eq!(result.as_object().map(|o| o.len()), Some(2), "{result}");
        fx.write("notes.md", b"changed");
        let again =
            call_tool::<GetTextContent>(&fx, r#"{"path":"notes.md","with_version":true}"#).unwrap();
        assert!(
            !again.contains(&ContentVersion::of(text.as_bytes()).to_string()),
            "{again}"
        );
        // Without it (or with false) the text stays bare, as docs/tools.md says.
        let bare = call_tool::<GetTextContent>(&fx, r#"{"path":"notes.md","with_version":false}"#)
            .unwrap();
        assert_eq!(bare, "changed");
    }

    #[test]
    fn the_text_is_returned_verbatim() {
        let fx = Fixture::new();
        let text = "line one\r\n\ttabs — ünïcödé 🦀\n\n  trailing spaces  ";
        fx.write("notes.md", text.as_bytes());
        assert_eq!(read(&fx, "notes.md").unwrap(), text);
        assert_eq!(read(&fx, "./sub//inner.txt").unwrap(), "inner");
        fx.write("empty", b"");
        assert_eq!(read(&fx, "empty").unwrap(), "");
    }

    #[test]
    fn hostile_paths_are_refused_and_nothing_outside_is_read() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (path, kind) in READ_ESCAPES {
            assert_refused(&fx, path, read(&fx, path), kind);
        }
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn in_root_symlinks_are_followed() {
        let fx = Fixture::new();
        fx.plant_links();
        for (path, text) in [
            ("in-file", "hello"),
            ("in-chain", "inner"),
            ("sub/up", "hello"),
        ] {
            assert_eq!(read(&fx, path).unwrap(), text, "{path}");
        }
    }

    #[test]
    fn reads_racing_a_folder_swapped_for_an_outside_link_never_leak() {
        let fx = Fixture::new();
        let dir = fx.project_dir();
        let swapper = fx.start_race();
        let (mut inside, mut refused) = (0, 0);
        for _ in 0..6_000 {
            match run(
                &dir,
                Args {
                    path: "swap/secret.txt".into(),
                    with_version: false,
                },
            ) {
                Ok(text) => {
                    assert_eq!(text, RACE_INSIDE, "read other content: {text}");
                    inside += 1;
                }
                Err(error) => {
                    fx.assert_clean(&error.message);
                    refused += 1;
                }
            }
        }
        assert!(swapper.stop() > 100, "the swapper barely ran");
        assert!(
            inside > 50,
            "too few reads saw the inside file: {inside} of 6000"
        );
        assert!(refused > 0, "no read met the link: the race did not happen");
    }

    #[test]
    fn eight_fifo_reads_at_once_all_return_an_error_at_once() {
        let fx = Fixture::new();
        fx.fifo("pipe");
        let receivers: Vec<_> = (0..8)
            .map(|_| {
                let dir = fx.project_dir();
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(run(
                        &dir,
                        Args {
                            path: "pipe".into(),
                            with_version: false,
                        },
                    ));
                });
                rx
            })
            .collect();
        for rx in receivers {
            let result = rx
                .recv_timeout(Duration::from_secs(5))
                .expect("a FIFO read blocked");
            let message = assert_refused(&fx, "pipe", result, &ErrorKind::REFUSED);
            assert_eq!(
                message,
                "'pipe' is a FIFO (named pipe), not a regular file or folder"
            );
        }
    }

    #[test]
    fn devices_folders_and_loops_are_refused() {
        let fx = Fixture::new();
        fx.plant_links();
        if fx.char_device("null") {
            assert_refused(&fx, "null", read(&fx, "null"), &ErrorKind::REFUSED);
        }
        fx.symlink("devnull", "/dev/null");
        assert_refused(
            &fx,
            "devnull",
            read(&fx, "devnull"),
            &ErrorKind::OUTSIDE_ROOT,
        );
        let message = assert_refused(&fx, "sub", read(&fx, "sub"), &ErrorKind::REFUSED);
        assert_eq!(message, "'sub' is a folder, not a file");
        assert_refused(
            &fx,
            "self-loop",
            read(&fx, "self-loop"),
            &ErrorKind::REFUSED,
        );
    }

    #[test]
    fn size_limits_are_enforced_at_the_cap_and_one_byte_over() {
        let fx = Fixture::new();
        fx.sized_file("big.bin", 50 << 20);
        let message = assert_refused(&fx, "big", read(&fx, "big.bin"), &ErrorKind::TOO_LARGE);
        assert_eq!(
            message,
            "'big.bin' is 52428800 bytes, over the read limit of 1048576 bytes"
        );
        fx.write("cap.txt", &vec![b'x'; 1 << 20]);
        fx.write("over.txt", &vec![b'x'; (1 << 20) + 1]);
        assert_eq!(read(&fx, "cap.txt").unwrap().len(), 1 << 20);
        assert_refused(&fx, "over", read(&fx, "over.txt"), &ErrorKind::TOO_LARGE);
    }

    #[test]
    fn the_read_limit_comes_from_the_call_context() {
        let fx = Fixture::new();
        let limits = Limits {
            max_read_bytes: 4,
            ..Limits::default()
        };
        let ctx = fx.context_with(limits);
        let error = GetTextContent::call(ctx.ctx(), r#"{"path":"hello.txt"}"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::TOO_LARGE);
        assert_eq!(
            error.message,
            "'hello.txt' is 5 bytes, over the read limit of 4 bytes"
        );
    }

    #[test]
    fn binary_utf16_and_invalid_utf8_content_is_not_text() {
        let fx = Fixture::new();
        fx.write("nul.bin", b"abc\0def");
        fx.write("utf16.txt", &[0xff, 0xfe, b'h', 0, b'i', 0]);
        fx.write("latin1.txt", b"na\xefve");
        let cases = [
            ("nul.bin", "'nul.bin' contains a NUL byte at offset 3: it is binary (or UTF-16), not UTF-8 text"),
            ("utf16.txt", "'utf16.txt' contains a NUL byte at offset 3: it is binary (or UTF-16), not UTF-8 text"),
            ("latin1.txt", "'latin1.txt' is not UTF-8 text (invalid byte at offset 2)"),
        ];
        for (path, expected) in cases {
            let message = assert_refused(&fx, path, read(&fx, path), &ErrorKind::NOT_TEXT);
            assert_eq!(message, expected);
        }
    }

    #[test]
    fn existing_files_with_control_or_bidi_names_stay_readable() {
        let fx = Fixture::new();
        for name in ["tab\there", "rlo\u{202e}txt.exe", "\u{2066}iso"] {
            fx.write(name, b"odd name");
            assert_eq!(read(&fx, name).unwrap(), "odd name");
        }
    }

    #[test]
    fn encoding_tricks_in_paths_stay_literal_or_are_refused() {
        let fx = Fixture::new();
        fx.write("%2e%2e/x", b"literal percent folder");
        assert_eq!(read(&fx, "%2e%2e/x").unwrap(), "literal percent folder");
        let cases = [
            ("a\\b", ErrorKind::INVALID_ARGUMENTS),
            ("C:\\x", ErrorKind::OUTSIDE_ROOT),
            ("~/x", ErrorKind::NOT_FOUND),
            ("\u{ff0e}\u{ff0e}/x", ErrorKind::NOT_FOUND),
            ("..\u{2215}x", ErrorKind::NOT_FOUND),
            ("nul\0byte", ErrorKind::INVALID_ARGUMENTS),
            (&"n".repeat(256), ErrorKind::INVALID_ARGUMENTS),
            (&"d/".repeat(2100), ErrorKind::INVALID_ARGUMENTS),
        ];
        for (path, kind) in cases {
            assert_refused(&fx, path, read(&fx, path), &kind);
        }
    }

    #[test]
    fn a_planted_hard_link_reads_the_outside_file_which_is_a_documented_limit() {
        let fx = Fixture::new();
        fx.hard_link_outside("linked.txt", "secret.txt");
        assert!(read(&fx, "linked.txt").unwrap().contains(LEAK_MARKER));
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        for (args, expected) in bad_path_arguments() {
            let error = call_tool::<GetTextContent>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert_eq!(
            call_tool::<GetTextContent>(&fx, r#"{"path":"hello.txt"}"#).unwrap(),
            "hello"
        );
    }

    #[test]
    fn the_spec_takes_exactly_one_required_string_path() {
        let spec = GetTextContent::spec();
        assert_eq!(spec.name, "get_text_content");
        assert_eq!(spec.parameters["required"], json!(["path"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
        assert_eq!(spec.parameters["properties"]["path"]["type"], "string");
    }
}
