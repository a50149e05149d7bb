//! Tests of `search_text`: what it finds and how it reports it, its limits, and its
//! confinement (nothing outside the root, where every file holds the leak marker, may ever
//! reach a result).

use std::sync::mpsc;
use std::time::Duration;

use rojos_fs_guard::testing::{
    assert_refused, call_tool, Fixture, LEAK_MARKER, RACE_INSIDE, READ_ESCAPES,
};
use rojos_plugin_api::{ErrorKind, Limits};

use super::*;

fn args(query: &str, path: &str, max_results: Option<u64>) -> Args {
    Args {
        query: query.to_owned(),
        path: path.to_owned(),
        max_results,
    }
}

fn find(fx: &Fixture, query: &str, path: &str) -> Result<String, ToolError> {
    run(&fx.project_dir(), args(query, path, None))
}

/// `(path, line, text)` of each match, from a result that must be a plain array.
fn matches(result: &str) -> Vec<(String, u64, String)> {
    let value: Value = serde_json::from_str(result).unwrap();
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a plain array: {result}"))
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["line"].as_u64().unwrap(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn m(path: &str, line: u64, text: &str) -> (String, u64, String) {
    (path.to_owned(), line, text.to_owned())
}

fn project(fx: &Fixture) {
    fx.write(
        "notes.txt",
        b"first line\nTODO: write tests\nlast line, no TODO here? TODO\n",
    );
    fx.write("src/main.rs", b"fn main() {\r\n    // TODO: more\r\n}\r\n");
    fx.write("src/util/deep.rs", b"// TODO deep\n");
    fx.write("src/a.rs", b"nothing\n");
    fx.write("zz.txt", b"TODO at the end");
}

// ---------------------------------------------------------------- finding

#[test]
fn matching_lines_are_returned_with_path_line_and_text_in_folder_order() {
    let fx = Fixture::new();
    project(&fx);
    let found = matches(&find(&fx, "TODO", ".").unwrap());
    assert_eq!(
        found,
        [
            m("notes.txt", 2, "TODO: write tests"),
            m("notes.txt", 3, "last line, no TODO here? TODO"),
            m("zz.txt", 1, "TODO at the end"),
            m("src/main.rs", 2, "    // TODO: more"),
            m("src/util/deep.rs", 1, "// TODO deep"),
        ]
    );
}

#[test]
fn path_limits_the_search_to_a_folder_or_a_file() {
    let fx = Fixture::new();
    project(&fx);
    for path in ["src", "src/", "./src", ".//src//"] {
        let found = matches(&find(&fx, "TODO", path).unwrap());
        assert_eq!(
            found,
            [
                m("src/main.rs", 2, "    // TODO: more"),
                m("src/util/deep.rs", 1, "// TODO deep")
            ],
            "{path}"
        );
    }
    let found = matches(&find(&fx, "TODO", "notes.txt").unwrap());
    assert_eq!(found.len(), 2);
    assert_eq!(matches(&find(&fx, "absent", ".").unwrap()), []);
    assert_eq!(
        matches(&find(&fx, "hello", "./").unwrap()),
        [m("hello.txt", 1, "hello")]
    );
}

#[test]
fn the_search_is_case_sensitive_and_literal() {
    let fx = Fixture::new();
    fx.write("a.txt", b"Todo\ntodo\nTODO\na.*b\n");
    assert_eq!(
        matches(&find(&fx, "todo", ".").unwrap()),
        [m("a.txt", 2, "todo")]
    );
    assert_eq!(
        matches(&find(&fx, "a.*b", ".").unwrap()),
        [m("a.txt", 4, "a.*b")]
    );
}

#[test]
fn a_long_line_is_cut_to_an_excerpt_around_the_match() {
    let fx = Fixture::new();
    let line = format!("{}NEEDLE{}", "é".repeat(5_000), "x".repeat(5_000));
    fx.write("min.js", line.as_bytes());
    let found = matches(&find(&fx, "NEEDLE", ".").unwrap());
    let text = &found[0].2;
    assert!(text.starts_with('…') && text.ends_with('…'), "{text}");
    assert!(text.contains("NEEDLE"));
    assert_eq!(text.chars().count(), MAX_LINE_CHARS + 2);
}

// ---------------------------------------------------------------- limits

#[test]
fn more_matches_than_max_results_are_cut_and_say_so() {
    let fx = Fixture::new();
    fx.write("many.txt", "hit\n".repeat(10).as_bytes());
    let result = run(&fx.project_dir(), args("hit", ".", Some(3))).unwrap();
    let value: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(value["truncated"], true);
    assert_eq!(value["matches"].as_array().unwrap().len(), 3);
    assert!(value["note"].as_str().unwrap().contains("max_results"));
    // Exactly max_results matches is complete: a plain array.
    let exact = run(&fx.project_dir(), args("hit", ".", Some(10))).unwrap();
    assert_eq!(matches(&exact).len(), 10);
}

#[test]
fn the_file_folder_and_byte_budgets_stop_the_search_and_say_so() {
    let fx = Fixture::new();
    for i in 0..10 {
        fx.write(&format!("d{i}/f.txt"), b"hit\n");
    }
    let dir = fx.project_dir();
    let query = args("hit", ".", None);
    // The root holds hello.txt (5 bytes, no hit) before d0/ … d9/, and counts as a folder.
    let cases = [
        (
            Budget {
                files: 4,
                ..Budget::default()
            },
            3,
            "after reading 4 files",
        ),
        (
            Budget {
                folders: 3,
                ..Budget::default()
            },
            2,
            "after listing 3 folders",
        ),
        (
            Budget {
                bytes: 12,
                ..Budget::default()
            },
            2,
            "after reading 13 bytes",
        ),
    ];
    for (budget, count, note) in cases {
        let found = search(&dir, &query, budget).unwrap();
        assert_eq!(found.matches.len(), count, "{budget:?}");
        let stopped = found.stopped.unwrap();
        assert!(stopped.contains(note), "{stopped}");
    }
}

#[test]
fn binary_non_utf8_too_large_and_special_files_are_skipped_without_blocking() {
    let fx = Fixture::new();
    fx.write("bin.dat", b"hit\0binary");
    fx.write("latin1.txt", b"hit caf\xe9");
    fx.write("big.txt", format!("hit {}", "x".repeat(100)).as_bytes());
    fx.write("ok.txt", b"hit");
    fx.fifo("pipe");
    let ctx = fx.context_with(Limits {
        max_read_bytes: 50,
        ..Limits::default()
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(SearchText::call(ctx.ctx(), r#"{"query":"hit"}"#));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the search blocked on a FIFO")
        .unwrap();
    assert_eq!(matches(&result), [m("ok.txt", 1, "hit")]);
}

#[test]
fn git_folders_are_skipped() {
    let fx = Fixture::new();
    fx.write(".git/config", b"hit");
    fx.write("src/.git/HEAD", b"hit");
    fx.write(".github/ci.yml", b"hit");
    assert_eq!(
        matches(&find(&fx, "hit", ".").unwrap()),
        [m(".github/ci.yml", 1, "hit")]
    );
}

// ---------------------------------------------------------------- confinement

/// Every file outside the root holds the leak marker, and links leading out (absolute,
/// relative, chains, `/proc/self/root`, other projects) sit in the root: searching for the
/// marker finds nothing, and nothing of the outside reaches the result.
#[test]
fn symlinks_leading_out_are_never_searched() {
    let fx = Fixture::new();
    fx.plant_links();
    fx.symlink("sub/deeper/out", "../../../../../outside");
    fx.write("mine.txt", b"no marker here");
    for query in [LEAK_MARKER, "LEAK", "secret", "in x"] {
        let result = find(&fx, query, ".").unwrap();
        fx.assert_clean(&result);
        assert_eq!(matches(&result), [], "{query}: {result}");
    }
}

#[test]
fn in_root_links_are_skipped_so_each_file_is_found_once_and_loops_end() {
    let fx = Fixture::new();
    fx.plant_links();
    // sub/up-dir -> .. would loop; in-dir -> sub and in-file -> hello.txt would repeat.
    let found = matches(&find(&fx, "inner", ".").unwrap());
    assert_eq!(found, [m("sub/inner.txt", 1, "inner")]);
    let found = matches(&find(&fx, "hello", ".").unwrap());
    assert_eq!(found, [m("hello.txt", 1, "hello")]);
    // A link given as `path` is followed when it stays inside, like every tool's path.
    let found = matches(&find(&fx, "inner", "in-dir").unwrap());
    assert_eq!(found, [m("in-dir/inner.txt", 1, "inner")]);
}

#[test]
fn hostile_paths_are_refused_and_leak_nothing() {
    let fx = Fixture::new();
    fx.plant_links();
    for (path, kind) in READ_ESCAPES {
        assert_refused(&fx, path, find(&fx, "x", path), kind);
    }
    for path in [
        "rel-dir",
        "abs-dir",
        "chain-a",
        "proc-root",
        "other-project",
        "../../p2/root",
    ] {
        assert_refused(&fx, path, find(&fx, "x", path), &ErrorKind::OUTSIDE_ROOT);
    }
}

#[test]
fn searches_racing_a_folder_swapped_for_an_outside_link_never_leak() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let swapper = fx.start_race();
    let mut inside = 0;
    for _ in 0..1_500 {
        let result = run(&dir, args("secret", ".", None)).unwrap();
        fx.assert_clean(&result);
        if result.contains(RACE_INSIDE.trim_end()) {
            inside += 1;
        }
        if let Ok(result) = run(&dir, args("secret", "swap", None)) {
            fx.assert_clean(&result);
        }
    }
    let flips = swapper.stop();
    assert!(flips > 100, "the swapper barely ran ({flips} flips)");
    assert!(inside > 0, "no search ever saw the inside file");
}

// ---------------------------------------------------------------- arguments

#[test]
fn bad_queries_and_max_results_are_invalid_arguments() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let cases = [
        (args("", ".", None), "query is empty: give the text to find"),
        (
            args("a\nb", ".", None),
            "query holds a line break: lines are searched one at a time, give text from one line",
        ),
        (
            args("a", ".", Some(0)),
            "max_results is 0: give a number from 1 to 1000",
        ),
        (
            args("a", ".", Some(1001)),
            "max_results is 1001: give a number from 1 to 1000",
        ),
    ];
    for (args, expected) in cases {
        let error = run(&dir, args).unwrap_err();
        assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS);
        assert_eq!(error.message, expected);
    }
}

#[test]
fn malformed_arguments_are_invalid_arguments_through_call() {
    let fx = Fixture::new();
    let cases = [
        ("{}", "missing field `query`"),
        (r#"{"query":1}"#, "invalid type: integer"),
        (r#"{"query":null}"#, "invalid type: null"),
        (r#"{"query":"a","path":["x"]}"#, "invalid type: sequence"),
        (r#"{"query":"a","max_results":"5"}"#, "invalid type: string"),
        (
            r#"{"query":"a","max_results":-1}"#,
            "invalid value: integer `-1`",
        ),
        (
            r#"{"query":"a","max_results":1.5}"#,
            "invalid type: floating point",
        ),
        (r#"{"query":"a","regex":true}"#, "unknown field `regex`"),
        (r#"{"query":"a","query":"b"}"#, "duplicate field `query`"),
        (r#"["a"]"#, "expected a JSON object"),
        ("not json", "expected a JSON object"),
    ];
    for (args, expected) in cases {
        let error = call_tool::<SearchText>(&fx, args).expect_err(args);
        assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args}");
        assert!(
            error.message.contains(expected),
            "{args}: {}",
            error.message
        );
    }
    let ok = call_tool::<SearchText>(&fx, r#"{"query":"inner","max_results":5}"#).unwrap();
    assert_eq!(matches(&ok), [m("sub/inner.txt", 1, "inner")]);
}

#[test]
fn the_spec_requires_a_non_empty_query_and_is_not_destructive() {
    let spec = SearchText::spec();
    assert_eq!(spec.name, "search_text");
    assert!(!spec.destructive);
    assert_eq!(spec.parameters["required"], json!(["query"]));
    assert_eq!(spec.parameters["properties"]["query"]["minLength"], 1);
    assert_eq!(
        spec.parameters["properties"]["max_results"]["maximum"],
        1000
    );
    assert_eq!(spec.parameters["additionalProperties"], false);
}
