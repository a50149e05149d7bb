//! The `list_files` tool: the entries of a folder in the project.
//!
//! - Args: `{"path": "<relative folder path>"}` (`.` is the project root).
//! - Result: `[{"name":"src","type":"directory"},{"name":"a.txt","type":"file"}]`, folders
//!   first, then files, each group sorted by name (byte order). In-root symlinks appear with
//!   their target's type; links leading out, dangling links, loops, FIFOs, sockets, devices
//!   and non-UTF-8 names are left out. When the folder has more than `max_list_entries`
//!   entries, the result is instead
//!   `{"entries":[…the first max_list_entries…],"truncated":true,"total":N,"omitted":M}`,
//!   the first entries in the same order (so every folder is kept before any file).
//! - Names holding invisible characters (control, format and bidirectional characters, made
//!   outside Rojos: new ones are refused) are written with JSON escapes (`"a\u200bb"`), so
//!   the result shows them and still parses to the exact names.
//! - Errors: `not_found`, `outside_root`, `refused` (not a folder), `invalid_arguments`.

#![forbid(unsafe_code)]

use rojos_fs_guard::{json_escaped, parse_args, ProjectDir};
use rojos_plugin_api::{export_tool, CallContext, Tool, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// Lists a folder.
#[derive(Debug)]
pub struct ListFiles;

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
    let result = dir.list(&args.path)?.to_json().to_string();
    // Names made outside Rojos may hold invisible characters: the model reads each as a
    // JSON escape (`\u202e`), and gives the exact name back by writing the same escape.
    Ok(json_escaped(&result).into_owned())
}

impl Tool for ListFiles {
    fn spec() -> ToolSpec {
        ToolSpec::new(
            "list_files",
            "List the files and folders directly inside a folder of the project, folders first, \
             then files, each sorted by name: an array of {name, type} with type 'file' or \
             'directory'. Use '.' for the project root, then list subfolders to explore \
             deeper. A very large folder returns {entries, truncated: true, total, omitted} \
             with only the first entries (folders kept first); omitted says how many were \
             left out.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the folder relative to the project root, e.g. '.' or 'src/utils'"
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

export_tool!(ListFiles);

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_fs_guard::testing::{
        assert_refused, bad_path_arguments, call_tool, Fixture, LIST_ESCAPES,
    };
    use rojos_plugin_api::{ErrorKind, Limits};
    use serde_json::Value;

    fn list(fx: &Fixture, path: &str) -> Result<String, ToolError> {
        run(
            &fx.project_dir(),
            Args {
                path: path.to_owned(),
            },
        )
    }

    #[test]
    fn the_root_is_listed_sorted_with_types() {
        let fx = Fixture::new();
        fx.write("Zebra.md", b"");
        fx.write("apple.txt", b"");
        fx.mkdir("b-folder");
        assert_eq!(
            list(&fx, ".").unwrap(),
            r#"[{"name":"b-folder","type":"directory"},{"name":"sub","type":"directory"},{"name":"Zebra.md","type":"file"},{"name":"apple.txt","type":"file"},{"name":"hello.txt","type":"file"}]"#
        );
        assert_eq!(
            list(&fx, "sub").unwrap(),
            r#"[{"name":"deeper","type":"directory"},{"name":"inner.txt","type":"file"}]"#
        );
        assert_eq!(list(&fx, "sub/deeper").unwrap(), "[]");
    }

    #[test]
    fn in_root_links_show_their_target_type_and_everything_else_is_left_out() {
        let fx = Fixture::new();
        fx.plant_links();
        fx.fifo("pipe");
        fx.char_device("null");
        let result = list(&fx, ".").unwrap();
        fx.assert_clean(&result);
        assert_eq!(
            result,
            r#"[{"name":"in-dir","type":"directory"},{"name":"sub","type":"directory"},{"name":"hello.txt","type":"file"},{"name":"in-chain","type":"file"},{"name":"in-file","type":"file"}]"#
        );
        let inner: Value = serde_json::from_str(&list(&fx, "in-dir").unwrap()).unwrap();
        assert_eq!(inner[1], json!({"name": "up-dir", "type": "directory"}));
        assert_eq!(inner[3], json!({"name": "up", "type": "file"}));
    }

    #[test]
    fn hostile_folders_are_refused_and_nothing_outside_is_listed() {
        let fx = Fixture::new();
        fx.plant_links();
        let before = fx.snapshot_outside();
        for (path, kind) in LIST_ESCAPES {
            assert_refused(&fx, path, list(&fx, path), kind);
        }
        fx.assert_outside_unchanged(&before);
    }

    #[test]
    fn listings_racing_a_folder_swapped_for_an_outside_link_never_leak() {
        let fx = Fixture::new();
        let dir = fx.project_dir();
        let swapper = fx.start_race();
        let mut inside = 0;
        for _ in 0..5_000 {
            match run(
                &dir,
                Args {
                    path: "swap".into(),
                },
            ) {
                Ok(text) => {
                    fx.assert_clean(&text);
                    assert!(
                        text.contains("inside-only.txt"),
                        "listed another folder: {text}"
                    );
                    inside += 1;
                }
                Err(error) => fx.assert_clean(&error.message),
            }
        }
        assert!(swapper.stop() > 100, "the swapper barely ran");
        assert!(
            inside > 50,
            "too few listings saw the inside folder: {inside}"
        );
    }

    #[test]
    fn a_listing_over_the_limit_is_an_object_with_truncated_and_total() {
        let fx = Fixture::new();
        for i in (0..12).rev() {
            fx.write(&format!("many/f{i:02}"), b"");
        }
        let ctx = fx.context_with(Limits {
            max_list_entries: 10,
            ..Limits::default()
        });
        let result: Value =
            serde_json::from_str(&ListFiles::call(ctx.ctx(), r#"{"path":"many"}"#).unwrap())
                .unwrap();
        assert_eq!(result["truncated"], true);
        assert_eq!(result["total"], 12);
        assert_eq!(result["omitted"], 2);
        let entries = result["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 10);
        assert_eq!(entries[0]["name"], "f00");
        assert_eq!(entries[9]["name"], "f09");
    }

    /// The listing computed naively: every name, sorted, folders moved first, cut at `max`,
    /// with the count of all (the folder holds only files and folders, so nothing is left
    /// out by type).
    fn naive_listing(fx: &Fixture, folder: &str, max: usize) -> Value {
        let names = fx.names(folder);
        let total = names.len();
        let (folders, files): (Vec<String>, Vec<String>) = names
            .into_iter()
            .partition(|name| fx.is_dir(&format!("{folder}/{name}")));
        let entries: Vec<Value> = folders
            .into_iter()
            .map(|name| json!({"name": name, "type": "directory"}))
            .chain(
                files
                    .into_iter()
                    .map(|name| json!({"name": name, "type": "file"})),
            )
            .take(max)
            .collect();
        let omitted = total - entries.len();
        json!({"entries": entries, "truncated": true, "total": total, "omitted": omitted})
    }

    #[test]
    fn a_folder_of_fifty_thousand_entries_gives_the_first_ten_folders_and_the_total() {
        let fx = Fixture::new();
        // Created in a scrambled order, names of mixed case and length, some folders.
        for i in 0..50_000u64 {
            let n = (i * 7919) % 50_021;
            match n % 5 {
                0 => fx.mkdir(&format!("big/D{n}")),
                1 => fx.write(&format!("big/{n:x}.rs"), b""),
                _ => fx.write(&format!("big/f{n}"), b""),
            }
        }
        let ctx = fx.context_with(Limits {
            max_list_entries: 10,
            ..Limits::default()
        });
        let result: Value =
            serde_json::from_str(&ListFiles::call(ctx.ctx(), r#"{"path":"big"}"#).unwrap())
                .unwrap();
        assert_eq!(result, naive_listing(&fx, "big", 10));
        assert_eq!(result["total"], 50_000);
        assert_eq!(result["entries"].as_array().unwrap().len(), 10);
        assert_eq!(result["entries"][0]["type"], "directory");
    }

    #[test]
    fn a_capped_listing_keeps_its_folders_though_every_file_name_sorts_first() {
        let fx = Fixture::new();
        for i in 0..20 {
            fx.write(&format!("capped/a{i:02}.txt"), b"");
        }
        fx.mkdir("capped/src");
        fx.mkdir("capped/tests");
        let ctx = fx.context_with(Limits {
            max_list_entries: 5,
            ..Limits::default()
        });
        let result: Value =
            serde_json::from_str(&ListFiles::call(ctx.ctx(), r#"{"path":"capped"}"#).unwrap())
                .unwrap();
        assert_eq!(
            result,
            json!({
                "entries": [
                    {"name": "src", "type": "directory"},
                    {"name": "tests", "type": "directory"},
                    {"name": "a00.txt", "type": "file"},
                    {"name": "a01.txt", "type": "file"},
                    {"name": "a02.txt", "type": "file"},
                ],
                "truncated": true,
                "total": 22,
                "omitted": 17,
            })
        );
    }

    #[test]
    fn a_hundred_nested_folders_can_be_listed() {
        let fx = Fixture::new();
        let deep = vec!["n"; 100].join("/");
        fx.mkdir(&deep);
        fx.write(&format!("{deep}/leaf.txt"), b"");
        assert_eq!(
            list(&fx, &deep).unwrap(),
            r#"[{"name":"leaf.txt","type":"file"}]"#
        );
    }

    #[test]
    fn names_with_invisible_characters_are_listed_escaped_and_exact() {
        let fx = Fixture::new();
        fx.write("rlo\u{202e}txt.exe", b"");
        fx.write("zero\u{200b}width", b"");
        let text = list(&fx, ".").unwrap();
        assert!(text.contains(r#""name":"rlo\u202etxt.exe""#), "{text}");
        assert!(text.contains(r#""name":"zero\u200bwidth""#), "{text}");
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{200b}'),
            "{text}"
        );
        let names: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(names[2]["name"], "rlo\u{202e}txt.exe");
        assert_eq!(names[3]["name"], "zero\u{200b}width");
    }

    #[test]
    fn malformed_arguments_are_invalid_arguments_through_call() {
        let fx = Fixture::new();
        for (args, expected) in bad_path_arguments() {
            let error = call_tool::<ListFiles>(&fx, &args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args:.80}");
            assert!(
                error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
        assert!(call_tool::<ListFiles>(&fx, r#"{"path":"."}"#)
            .unwrap()
            .starts_with('['));
    }

    #[test]
    fn the_spec_takes_exactly_one_required_string_path() {
        let spec = ListFiles::spec();
        assert_eq!(spec.name, "list_files");
        assert_eq!(spec.parameters["required"], json!(["path"]));
        assert_eq!(spec.parameters["additionalProperties"], false);
    }
}
