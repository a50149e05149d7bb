//! The loader on real built libraries: the five plugins, and every way a plugin file can be
//! wrong (panicking, garbage, truncated, another interface version, a duplicate name, hung).

use std::{path::Path, sync::Arc, time::Duration};

use rojos::{
    config::ConfigFile,
    plugins::{invoke, CallRequest, FailureKind, LoadFailure, Loader, ModuleError, Tool, ToolArgs},
    state::{AppState, StartError},
    storage::{ProjectId, Storage},
};
use rojos_plugin_api::ErrorKind;
use serde_json::{json, Value};

use crate::support::{builtin_libs, plugin_lib, BUILTIN_TOOLS};

/// Arguments from a JSON object.
fn args(value: Value) -> ToolArgs {
    ToolArgs::try_from(value).expect("arguments are an object")
}

fn load(loader: &Loader, path: &Path) -> Arc<Tool> {
    loader.load(path).unwrap_or_else(|e| panic!("{e}"))
}

fn load_error(path: &Path) -> (String, LoadFailure) {
    let loader = Loader::new(4).unwrap();
    let e = loader.load(path).expect_err("the file must be refused");
    (e.to_string(), e.reason)
}

struct Project {
    _dir: tempfile::TempDir,
    request: CallRequest,
}

fn project(timeout: Duration) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(&dir.path().join("storage")).unwrap();
    let root = storage
        .project_root(&ProjectId::parse("p1").unwrap())
        .unwrap();
    let root_path = dir.path().join("storage/p1/root");
    Project {
        _dir: dir,
        request: CallRequest {
            project_id: "p1".to_owned(),
            root: Arc::new(root),
            root_path,
            limits: Default::default(),
            timeout,
            create_only: Vec::new(),
            stop: Default::default(),
        },
    }
}

#[test]
fn the_five_builtin_plugins_load_with_their_manifests() {
    let loader = Loader::new(4).unwrap();
    for (lib, name) in builtin_libs().iter().zip(BUILTIN_TOOLS) {
        let tool = load(&loader, lib);
        assert_eq!(tool.name(), name);
        let manifest = &tool.library.manifest;
        assert!(manifest.panic_unwind);
        assert_eq!(manifest.plugin_api_version, "0.1.0");
        assert_eq!(manifest.spec.parameters["type"], "object", "{name}");
        assert!(!manifest.spec.description.is_empty());
        let changes: &[&str] = match name {
            "write_text_content" => &["path"],
            _ => &[],
        };
        assert_eq!(manifest.spec.changes_paths, changes, "{name}");
        let creates: &[&str] = match name {
            "create_directory" => &["path"],
            _ => &[],
        };
        assert_eq!(manifest.spec.creates_paths, creates, "{name}");
    }
    for (crate_name, changes) in [
        ("rojos_tool_move_path", &["from", "to"][..]),
        ("rojos_tool_delete_path", &["path"][..]),
        // Built without declaring it, as every plugin from before the field: changes nothing.
        ("rojos_test_panic_tool", &[][..]),
    ] {
        let tool = load(&loader, &plugin_lib(crate_name));
        assert_eq!(
            tool.library.manifest.spec.changes_paths, changes,
            "{crate_name}"
        );
    }
}

#[test]
fn loading_the_same_content_twice_reuses_one_library() {
    let loader = Loader::new(4).unwrap();
    let lib = plugin_lib("rojos_tool_list_files");
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("copy.so");
    std::fs::copy(&lib, &copy).unwrap();
    let a = load(&loader, &lib);
    let b = load(&loader, &copy);
    assert!(Arc::ptr_eq(&a.library, &b.library));
    assert_eq!(b.source, copy);
}

#[test]
fn a_missing_file_is_refused_naming_it() {
    let (message, reason) = load_error(Path::new("/nonexistent/libnothing.so"));
    assert!(matches!(reason, LoadFailure::Read(_)), "{reason:?}");
    assert!(
        message.starts_with("plugin '/nonexistent/libnothing.so': cannot read:"),
        "{message}"
    );
}

#[test]
fn garbage_text_and_empty_files_are_not_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "garbage.so",
            &[0x13, 0x37, 0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3],
            "not an ELF file (10 bytes)",
        ),
        (
            "text.so",
            b"#!/bin/sh\necho not a library\n",
            "not an ELF file",
        ),
        ("empty.so", b"", "empty file"),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let (message, reason) = load_error(&path);
        assert!(
            matches!(reason, LoadFailure::NotALibrary(_)),
            "{name}: {reason:?}"
        );
        assert!(
            message.contains(name) && message.contains(expected),
            "{message}"
        );
    }
}

#[test]
fn a_library_whose_section_reaches_past_its_end_is_refused_before_dlopen() {
    // Headers intact, one section's recorded size one byte past the end of the file: only a
    // check of every section's range against the file catches it.
    let mut bytes = std::fs::read(plugin_lib("rojos_tool_list_files")).unwrap();
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (table, entry, count) = (
        u64_at(&bytes, 0x28) as usize,
        u16_at(&bytes, 0x3a),
        u16_at(&bytes, 0x3c),
    );
    let header = (0..count)
        .map(|i| table + i * entry)
        .rfind(|&h| u32::from_le_bytes(bytes[h + 4..h + 8].try_into().unwrap()) == 1) // PROGBITS
        .expect("a PROGBITS section");
    let offset = u64_at(&bytes, header + 24);
    let past_the_end = bytes.len() as u64 - offset + 1;
    bytes[header + 32..header + 40].copy_from_slice(&past_the_end.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long-section.so");
    std::fs::write(&path, &bytes).unwrap();
    let (message, reason) = load_error(&path);
    assert!(
        matches!(&reason, LoadFailure::Incomplete(why) if why.contains("a section ends at byte")),
        "{reason:?}"
    );
    assert!(
        message.contains("incomplete or damaged library"),
        "{message}"
    );
}

#[test]
fn a_truncated_copy_of_a_real_plugin_is_refused_before_dlopen() {
    let bytes = std::fs::read(plugin_lib("rojos_tool_list_files")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for percent in [5, 50, 90, 99] {
        let path = dir.path().join(format!("cut{percent}.so"));
        std::fs::write(&path, &bytes[..bytes.len() * percent / 100]).unwrap();
        let (message, reason) = load_error(&path);
        assert!(
            matches!(reason, LoadFailure::Incomplete(_)),
            "{percent}%: {reason:?}"
        );
        assert!(
            message.contains("incomplete or damaged library"),
            "{message}"
        );
    }
}

#[test]
fn a_shared_library_without_the_plugin_export_is_not_a_plugin() {
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.exists())
    .expect("the system's libm");
    let (message, reason) = load_error(libm);
    assert!(
        matches!(reason, LoadFailure::Module(ModuleError::NotAPlugin(_))),
        "{reason:?}"
    );
    assert!(
        message.contains("exports no abi_stable root module"),
        "{message}"
    );
}

#[test]
fn a_plugin_built_against_another_interface_version_is_refused_naming_both() {
    let (message, reason) = load_error(&plugin_lib("rojos_test_other_version"));
    assert!(
        matches!(reason, LoadFailure::Module(ModuleError::Version { .. })),
        "{reason:?}"
    );
    assert!(
        message.contains("built against plugin-api 0.2.0, host expects 0.1.0"),
        "{message}"
    );
}

#[test]
fn two_plugins_with_the_same_tool_name_stop_the_start_naming_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let list_files = plugin_lib("rojos_tool_list_files");
    let impostor = plugin_lib("rojos_test_dup_list_files");
    let text = format!(
        "[server]\nstorage = \"s\"\n[plugins]\nload = [{:?}, {:?}]\n",
        list_files.display().to_string(),
        impostor.display().to_string()
    );
    let config =
        ConfigFile::parse(&text, &dir.path().join("rojos.toml"), dir.path(), &|_| None).unwrap();
    let e = AppState::start(config).expect_err("a duplicate name must be refused");
    assert!(matches!(e, StartError::Plugins(_)), "{e:?}");
    let expected = format!(
        "plugin '{}': tool name 'list_files' is already provided by '{}'",
        impostor.display(),
        list_files.display()
    );
    assert_eq!(e.to_string(), expected);
}

#[test]
fn every_failing_plugin_is_listed_when_the_start_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.so");
    std::fs::write(&garbage, "garbage").unwrap();
    let text = format!(
        "[plugins]\nload = [\"garbage.so\", \"missing.so\", {:?}]\n",
        plugin_lib("rojos_tool_list_files").display().to_string()
    );
    let config =
        ConfigFile::parse(&text, &dir.path().join("rojos.toml"), dir.path(), &|_| None).unwrap();
    let e = AppState::start(config)
        .expect_err("bad plugins must stop the start")
        .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].contains("garbage.so': not a plugin library"),
        "{e}"
    );
    assert!(lines[1].contains("missing.so': cannot read"), "{e}");
}

#[tokio::test]
async fn a_panicking_plugin_gives_an_error_result_and_the_host_keeps_working() {
    let loader = Loader::new(4).unwrap();
    let panicky = load(&loader, &plugin_lib("rojos_test_panic_tool"));
    let list_files = load(&loader, &plugin_lib("rojos_tool_list_files"));
    let project = project(Duration::from_secs(5));
    for _ in 0..3 {
        let failure = invoke(&panicky, &args(json!({})), &project.request)
            .await
            .unwrap_err();
        assert_eq!(failure.message, "the tool panicked: deliberate test panic");
        assert_eq!(failure.kind, FailureKind::Plugin(ErrorKind::PANICKED));
    }
    let outcome = invoke(&list_files, &args(json!({"path": "."})), &project.request).await;
    assert_eq!(outcome, Ok("[]".to_owned()));
}

#[tokio::test]
async fn a_hung_plugin_times_out_while_other_tools_are_served() {
    let loader = Loader::new(1).unwrap();
    let hang = load(&loader, &plugin_lib("rojos_test_hang_tool"));
    let list_files = load(&loader, &plugin_lib("rojos_tool_list_files"));
    let project = project(Duration::from_millis(300));

    let hung = tokio::spawn({
        let (hang, request) = (hang.clone(), project.request.clone());
        async move { invoke(&hang, &args(json!({"seconds": 3})), &request).await }
    });
    // While it hangs, another tool answers.
    let outcome = invoke(&list_files, &args(json!({"path": "."})), &project.request).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    let failure = hung.await.unwrap().unwrap_err();
    assert_eq!(
        failure.message,
        "tool hang_tool did not finish within 0.3 s and was abandoned"
    );
    assert_eq!(failure.kind, FailureKind::Timeout);
    // Its abandoned thread still holds the tool's only permit: the next call is refused as busy.
    let failure = invoke(&hang, &args(json!({"seconds": 0})), &project.request)
        .await
        .unwrap_err();
    assert!(
        failure.message.starts_with("tool hang_tool is busy"),
        "{failure:?}"
    );
    assert_eq!(failure.kind, FailureKind::Busy);
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema_before_the_plugin_runs() {
    let loader = Loader::new(4).unwrap();
    let write = load(&loader, &plugin_lib("rojos_tool_write_text_content"));
    let project = project(Duration::from_secs(5));
    // Text that is no JSON object never gets here: `rojos_llm` refuses it when it parses the
    // call (its `assemble` tests, and
    // `chat::failing_unknown_and_malformed_calls_become_error_results_the_model_sees`).
    let cases = [
        (json!({"text": "x"}), "\"path\" is a required property"),
        (
            json!({"path": "a.txt", "text": 7}),
            "/text: 7 is not of type \"string\"",
        ),
        (
            json!({"path": "a.txt", "text": "x", "mode": "w"}),
            "Additional properties are not allowed ('mode' was unexpected)",
        ),
        (
            json!({"path": null, "text": "x"}),
            "/path: null is not of type \"string\"",
        ),
    ];
    for (value, expected) in cases {
        let failure = invoke(&write, &args(value.clone()), &project.request)
            .await
            .unwrap_err();
        assert_eq!(failure.kind, FailureKind::InvalidArguments, "{value}");
        assert!(
            failure.message.contains(expected),
            "{value}: {}",
            failure.message
        );
    }
    let outcome = invoke(
        &write,
        &args(json!({"path": "a/b.txt", "text": "hello"})),
        &project.request,
    )
    .await;
    assert_eq!(outcome, Ok(r#"{"ok":true}"#.to_owned()));
}
