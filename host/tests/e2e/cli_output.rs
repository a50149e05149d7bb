//! What the `rojos` binary prints around its work: the log with and without a terminal (no
//! ESC bytes into a pipe, colours on a pseudo-terminal, JSON lines with `--log-format json`),
//! subcommands without the server's start-up lines, one message for a missing or unreadable
//! config file, and unknown names answered with the valid ones.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use crate::support::binary::{cleared, rojos, run, Ran};
use crate::support::host::HostConfig;
use crate::support::pty::OnTerminal;
use crate::support::upstream::{ScriptedUpstream, Turn};

/// A folder with a valid `rojos.toml` (the five built-in plugins, a `default` rojo).
fn configured(extra: &str) -> tempfile::TempDir {
    HostConfig::builtins().with(extra).in_temp_folder()
}

/// `rojos --config DIR/rojos.toml ARGS`, with `env` set.
fn rojos_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let config = dir.join("rojos.toml").display().to_string();
    let mut command = rojos(&["--config", &config]);
    command.args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    run(command)
}

#[test]
fn the_log_into_a_pipe_has_no_escape_bytes() {
    let dir = configured("");
    let ran = rojos_in(dir.path(), &["check"], &[("RUST_LOG", "rojos=info")]);
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stderr.contains("plugin loaded"), "{ran}");
    assert!(!ran.stderr.contains('\u{1b}'), "{ran}");
}

#[test]
fn the_log_on_a_terminal_is_coloured_unless_no_color_is_set() {
    let dir = configured("");
    let config = dir.path().join("rojos.toml").display().to_string();
    let args = ["--config", config.as_str(), "check"];
    let terminal = OnTerminal::start(&args, dir.path(), &[("RUST_LOG", "rojos=info")], cleared());
    let (code, screen) = terminal.finish();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("plugin loaded"), "{screen}");
    // The level, in green as tracing-subscriber colours INFO.
    assert!(screen.contains("\u{1b}[32m INFO\u{1b}[0m"), "{screen:?}");

    let env = [("RUST_LOG", "rojos=info"), ("NO_COLOR", "1")];
    let (code, screen) = OnTerminal::start(&args, dir.path(), &env, cleared()).finish();
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("plugin loaded") && !screen.contains('\u{1b}'),
        "{screen:?}"
    );
}

#[test]
fn log_format_json_writes_one_json_object_per_line() {
    let dir = configured("");
    for (args, env) in [
        (
            &["--log-format", "json", "check"][..],
            &[("RUST_LOG", "rojos=info")][..],
        ),
        (
            &["check"][..],
            &[("RUST_LOG", "rojos=info"), ("ROJOS_LOG_FORMAT", "json")][..],
        ),
    ] {
        let ran = rojos_in(dir.path(), args, env);
        assert_eq!(ran.code, Some(0), "{ran}");
        let lines: Vec<serde_json::Value> = ran
            .stderr
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        let loaded: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|l| l["message"] == "plugin loaded")
            .collect();
        assert_eq!(loaded.len(), 5, "{ran}");
        assert_eq!(loaded[0]["level"], "INFO");
        assert_eq!(loaded[0]["target"], "rojos_plugin_host::loader");
        assert!(loaded[0]["tool"].is_string() && loaded[0]["timestamp"].is_string());
        assert!(loaded[0]["spans"][0]["path"].is_string(), "{}", loaded[0]);
    }
}

#[tokio::test]
async fn subcommands_print_their_output_and_no_start_up_lines() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("p1", "get_time", serde_json::json!({"timezone": "UTC"}))]),
        Turn::text("It is 12:00 in UTC."),
    ])
    .await;
    let dir = HostConfig::builtins().upstream(&upstream).in_temp_folder();
    let path = dir.path().to_owned();
    let runs = tokio::task::spawn_blocking(move || {
        [
            rojos_in(&path, &["check"], &[]),
            rojos_in(&path, &["tools"], &[]),
            rojos_in(&path, &["probe", "scripted"], &[]),
        ]
    })
    .await
    .unwrap();
    for ran in &runs {
        assert_eq!(ran.code, Some(0), "{ran}");
        assert!(!ran.stdout.is_empty(), "{ran}");
        assert_eq!(ran.stderr, "", "no log lines: {ran}");
    }
    assert!(runs[0].stdout.contains("config ok: 5 tools, 1 rojos"));
    assert!(runs[2].stdout.contains("the provider works with rojos"));
}

#[tokio::test]
async fn a_failing_probe_reports_once_without_the_clients_retry_warnings() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::status(503, "overloaded"),
        Turn::status(503, "overloaded"),
    ])
    .await;
    let dir = HostConfig::builtins().upstream(&upstream).in_temp_folder();
    let path = dir.path().to_owned();
    let ran = tokio::task::spawn_blocking(move || rojos_in(&path, &["probe", "scripted"], &[]))
        .await
        .unwrap();
    assert_eq!(ran.code, Some(2), "{ran}");
    // Both attempts were made (max_attempts = 2), and only the report says so.
    assert_eq!(upstream.received().len(), 2);
    assert!(ran.stdout.contains("streaming      FAILED"), "{ran}");
    assert_eq!(
        ran.stderr, "rojos: provider \"scripted\" failed the probe\n",
        "{ran}"
    );
}

#[test]
fn the_server_still_logs_its_start_up() {
    let dir = configured("");
    let config = dir.path().join("rojos.toml").display().to_string();
    let mut child = rojos(&["--config", &config])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).unwrap();
    assert!(first.starts_with("rojos listening on "), "{first}");
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("plugin loaded").count(), 5, "{stderr}");
}

#[test]
fn a_missing_config_file_is_one_message_with_the_path_and_rojos_init() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.toml");
    let expected = format!(
        "rojos: no config file at {}: create one with `rojos init`, or pass --config PATH\n",
        missing.display()
    );
    for args in [&["check"][..], &["tools"], &["probe", "x"], &[]] {
        let mut command = rojos(&["--config", &missing.display().to_string()]);
        command.args(args);
        let ran = run(command);
        assert_eq!(ran.code, Some(2), "{args:?}: {ran}");
        assert_eq!(ran.stderr, expected, "{args:?}");
        assert_eq!(ran.stdout, "", "{args:?}");
    }
    // The default path is shown absolute, so the user sees where it was looked for.
    let mut command = rojos(&["check"]);
    command.current_dir(dir.path());
    let ran = run(command);
    assert_eq!(
        ran.stderr,
        format!(
            "rojos: no config file at {}: create one with `rojos init`, or pass --config PATH\n",
            dir.path().join("rojos.toml").display()
        )
    );
}

#[test]
fn an_unreadable_config_file_names_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    // A folder where the file should be: unreadable as a file, also for root.
    let folder = dir.path().join("rojos.toml");
    std::fs::create_dir(&folder).unwrap();
    let ran = rojos_in(dir.path(), &["check"], &[]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        format!(
            "rojos: cannot read config file {}: Is a directory (os error 21); fix that, create another with `rojos init -o PATH`, or pass --config PATH\n",
            folder.display()
        )
    );
}

#[test]
fn unknown_names_are_answered_with_the_valid_ones() {
    let dir = configured("[rojos.reader]\nprovider = \"scripted\"\ntools = [\"list_files\"]\n");
    let ran = rojos_in(dir.path(), &["tools", "--rojo", "nope"], &[]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: unknown rojo \"nope\" (this server has: default, reader)\n"
    );
    let ran = rojos_in(dir.path(), &["probe", "nope"], &[]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: unknown provider \"nope\" (the config has: scripted)\n"
    );
    let dir = configured("[rojos.reader]\nprovider = \"scripted\"\ntools = [\"grep\"]\n");
    let ran = rojos_in(dir.path(), &["check"], &[]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: rojos.reader.tools: no loaded plugin provides a tool named \"grep\" (loaded: create_directory, get_text_content, list_files, read_path_meta, write_text_content)\n"
    );
}

#[tokio::test]
async fn probing_a_provider_without_its_key_says_how_to_set_it_and_sends_nothing() {
    let upstream = ScriptedUpstream::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = HostConfig::builtins().upstream(&upstream).render().replace(
        "model = \"scripted-model\"",
        "model = \"scripted-model\"\napi_key_env = \"E2E_UNSET_PROVIDER_KEY\"",
    );
    std::fs::write(dir.path().join("rojos.toml"), config).unwrap();
    let path = dir.path().to_owned();
    let ran = tokio::task::spawn_blocking(move || rojos_in(&path, &["probe", "scripted"], &[]))
        .await
        .unwrap();
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: scripted has no API key: set E2E_UNSET_PROVIDER_KEY in the server's environment and restart it, or set another provider in rojos.toml\n"
    );
    assert!(upstream.received().is_empty());
}

#[test]
fn the_cleared_variables_include_every_hosted_kinds_key() {
    for kind in rojos_llm::ProviderKind::ALL {
        if let Some(var) = kind.api_key_env() {
            assert!(cleared().contains(&var), "{var}");
        }
    }
}
