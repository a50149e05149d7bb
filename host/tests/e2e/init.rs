//! `rojos init`: for every provider kind the file it writes passes `rojos check` (which loads
//! the real plugins it points at); it never overwrites a file without `--force`; it asks on a
//! terminal; it probes the provider (against the scripted upstream), keeps the file when the
//! probe fails, and says how to set a missing key instead of probing.

use std::path::Path;

use crate::support::binary::{cleared, rojos, run, Ran};
use crate::support::pty::OnTerminal;
use crate::support::upstream::{Models, ScriptedUpstream, Turn};

/// `rojos init ARGS -o DIR/rojos.toml`.
fn init(dir: &Path, args: &[&str]) -> Ran {
    let out = dir.join("rojos.toml").display().to_string();
    let mut all = vec!["init", "-o", &out];
    all.extend_from_slice(args);
    run(rojos(&all))
}

/// `rojos --config DIR/rojos.toml check`.
fn check(dir: &Path) -> Ran {
    let config = dir.join("rojos.toml").display().to_string();
    run(rojos(&["--config", &config, "check"]))
}

/// Init for `kind` with flags only, then `rojos check` on what it wrote.
fn init_then_check(kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ran = init(dir.path(), &["--kind", kind, "--no-probe"]);
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("config ok: 7 tools, 2 rojos"), "{ran}");
    assert_eq!(ran.stderr, "", "init prints no log lines");
    let text = std::fs::read_to_string(dir.path().join("rojos.toml")).unwrap();
    assert!(
        text.contains(&format!("[providers.{kind}]\nkind = \"{kind}\"")),
        "{text}"
    );
    assert!(text.contains(&format!("provider = \"{kind}\"")), "{text}");
    let checked = check(dir.path());
    assert_eq!(checked.code, Some(0), "{checked}");
    assert!(
        checked.stdout.contains("config ok: 7 tools, 2 rojos"),
        "{checked}"
    );
}

macro_rules! init_kind_tests {
    ($($test:ident: $kind:literal,)*) => {
        $(
            #[test]
            fn $test() {
                init_then_check($kind);
            }
        )*
    };
}

init_kind_tests! {
    init_openai_writes_a_file_that_passes_check: "openai",
    init_anthropic_writes_a_file_that_passes_check: "anthropic",
    init_gemini_writes_a_file_that_passes_check: "gemini",
    init_mistral_writes_a_file_that_passes_check: "mistral",
    init_openrouter_writes_a_file_that_passes_check: "openrouter",
    init_groq_writes_a_file_that_passes_check: "groq",
    init_deepseek_writes_a_file_that_passes_check: "deepseek",
    init_ollama_writes_a_file_that_passes_check: "ollama",
    init_lmstudio_writes_a_file_that_passes_check: "lmstudio",
    init_vllm_writes_a_file_that_passes_check: "vllm",
    init_llamacpp_writes_a_file_that_passes_check: "llamacpp",
}

#[test]
fn init_refuses_to_overwrite_a_file_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.toml");
    std::fs::write(&path, "# mine\n").unwrap();
    let ran = init(dir.path(), &["--kind", "groq", "--no-probe"]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        format!(
            "rojos: {} already exists: pass --force to overwrite it, or -o PATH to write another file\n",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    let forced = init(dir.path(), &["--kind", "groq", "--no-probe", "--force"]);
    assert_eq!(forced.code, Some(0), "{forced}");
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("kind = \"groq\""));
}

#[test]
fn init_writes_to_the_config_path_and_names_plugins_inside_its_folder_relatively() {
    // A folder holding the config and, below it, the built plugins (hard-linked where the file system allows).
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    std::fs::create_dir(&build).unwrap();
    for entry in std::fs::read_dir(crate::support::build_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.starts_with("librojos_tool_") && name.ends_with(".so") {
            let link = build.join(&name);
            if std::fs::hard_link(&path, &link).is_err() {
                std::fs::copy(&path, &link).unwrap();
            }
        }
    }
    let config = dir.path().join("rojos.toml").display().to_string();
    let plugins = build.display().to_string();
    let ran = run(rojos(&[
        "--config",
        &config,
        "init",
        "--kind",
        "mistral",
        "--no-probe",
        "--plugins",
        &plugins,
    ]));
    assert_eq!(ran.code, Some(0), "{ran}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("  \"build/librojos_tool_list_files.so\",\n"),
        "{text}"
    );
    assert_eq!(check(dir.path()).code, Some(0));
}

#[test]
fn init_without_kind_and_without_a_terminal_asks_for_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let ran = init(dir.path(), &[]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: no --kind given and no terminal to ask on: pass --kind KIND (openai, anthropic, gemini, mistral, openrouter, groq, deepseek, ollama, lmstudio, vllm, llamacpp)\n"
    );
    assert!(!dir.path().join("rojos.toml").exists());
}

#[test]
fn an_unknown_kind_is_refused_with_the_list_of_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let ran = init(dir.path(), &["--kind", "chatgpt"]);
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(
        ran.stderr.contains("invalid value 'chatgpt' for '--kind <KIND>'")
            && ran.stderr.contains("[possible values: openai, anthropic, gemini, mistral, openrouter, groq, deepseek, ollama, lmstudio, vllm, llamacpp]"),
        "{ran}"
    );
}

#[test]
fn a_bad_base_url_writes_nothing_and_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ran = init(
        dir.path(),
        &[
            "--kind",
            "vllm",
            "--base-url",
            "ftp://gpu.lan/v1",
            "--no-probe",
        ],
    );
    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: providers.vllm.base_url: must start with http:// or https://, got \"ftp://gpu.lan/v1\" (nothing written)\n"
    );
    assert!(!dir.path().join("rojos.toml").exists());
}

#[test]
fn init_asks_on_a_terminal_and_enter_takes_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rojos.toml").display().to_string();
    let mut terminal = OnTerminal::start(
        &["init", "-o", &out, "--no-probe"],
        dir.path(),
        &[],
        cleared(),
    );
    // No key is set: the default is Ollama, the first local kind.
    let screen = terminal.wait_for("Provider [8]: ");
    assert!(
        screen.contains(" 9. LM Studio   on this machine, http://127.0.0.1:1234/v1"),
        "{screen}"
    );
    terminal.type_line("twelve");
    terminal.wait_for("choose a number from 1 to 11");
    terminal.type_line("9");
    terminal.wait_for("Model [the first one the server lists]: ");
    terminal.type_line("qwen3-8b");
    terminal.wait_for("Base URL [http://127.0.0.1:1234/v1]: ");
    terminal.type_line("");
    let (code, screen) = terminal.finish();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("config ok: 7 tools, 2 rojos"), "{screen}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("kind = \"lmstudio\""), "{text}");
    assert!(text.contains("model = \"qwen3-8b\""), "{text}");
    assert!(
        text.contains("# base_url = \"http://127.0.0.1:1234/v1\""),
        "{text}"
    );
}

#[test]
fn on_a_terminal_a_set_key_makes_its_kind_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rojos.toml").display().to_string();
    let mut terminal = OnTerminal::start(
        &["init", "-o", &out, "--no-probe"],
        dir.path(),
        &[("MISTRAL_API_KEY", "mk-e2e")],
        cleared(),
    );
    let screen = terminal.wait_for("Provider [4]: ");
    assert!(
        screen.contains("Mistral     hosted, key in MISTRAL_API_KEY (set)"),
        "{screen}"
    );
    for _ in 0..3 {
        terminal.type_line("");
    }
    let (code, screen) = terminal.finish();
    assert_eq!(code, 0, "{screen}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\nkind = \"mistral\""), "{text}");
    assert!(
        text.contains("\nmodel = \"mistral-medium-latest\""),
        "{text}"
    );
}

/// Runs `rojos init ARGS` off the test's runtime, so the scripted upstream can answer.
async fn init_async(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = dir.join("rojos.toml").display().to_string();
    let mut command = rojos(&["init", "-o", &out]);
    command.args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap()
}

#[tokio::test]
async fn init_probes_the_provider_it_wrote_with_its_key() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("p1", "get_time", serde_json::json!({"timezone": "UTC"}))]),
        Turn::text("It is 12:00 in UTC."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ran = init_async(
        dir.path(),
        &["--kind", "openai", "--base-url", &upstream.base_url],
        &[("OPENAI_API_KEY", "sk-e2e-init")],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("the provider works with rojos"),
        "{ran}"
    );
    assert!(ran.stdout.contains("start the server with `"), "{ran}");
    assert_eq!(ran.stderr, "", "{ran}");
    let received = upstream.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].body["model"], "gpt-4.1-mini");
    assert_eq!(received[0].headers["authorization"], "Bearer sk-e2e-init");
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_failed_probe_keeps_the_file_prints_the_fix_and_exits_1() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("I never call tools.")]).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = init_async(
        dir.path(),
        &[
            "--kind",
            "ollama",
            "--model",
            "tiny",
            "--base-url",
            &upstream.base_url,
        ],
        &[],
    )
    .await;
    assert_eq!(ran.code, Some(1), "{ran}");
    assert!(ran.stdout.contains("tool call      FAILED"), "{ran}");
    assert!(
        ran.stdout.contains("Ollama failed the probe (the file is kept). Start it with `ollama serve` and pull a model with tool support (`ollama pull qwen2.5:7b`), or set base_url to where it listens, then check it again with `"),
        "{ran}"
    );
    assert!(ran.stdout.contains("probe ollama`"), "{ran}");
    let text = std::fs::read_to_string(dir.path().join("rojos.toml")).unwrap();
    assert!(text.contains("model = \"tiny\""), "{text}");
}

#[test]
fn a_hosted_kind_without_its_key_is_not_probed_and_init_says_how_to_set_it() {
    let dir = tempfile::tempdir().unwrap();
    let ran = init(dir.path(), &["--kind", "anthropic"]);
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("not probed: ANTHROPIC_API_KEY is not set. Get a key at https://console.anthropic.com/settings/keys, `export ANTHROPIC_API_KEY=...`, then check it with `"),
        "{ran}"
    );
    assert!(!ran.stdout.contains("probing"), "{ran}");
}

#[test]
fn a_local_kind_without_a_model_that_is_not_running_keeps_the_file_and_says_how_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let ran = init(dir.path(), &["--kind", "llamacpp", "--base-url", &base_url]);
    assert_eq!(ran.code, Some(1), "{ran}");
    assert!(
        ran.stdout.contains(&format!("llama.cpp failed the probe (the file is kept): llama.cpp is not running at 127.0.0.1:{port}: start it with `llama-server --jinja --port 8081 -m MODEL.gguf`, or set another provider in rojos.toml")),
        "{ran}"
    );
    assert!(dir.path().join("rojos.toml").exists());
}

#[tokio::test]
async fn a_local_kind_without_a_model_is_probed_with_the_first_chat_model_it_lists() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::tool_calls(&[("p1", "get_time", serde_json::json!({"timezone": "UTC"}))]),
        Turn::text("It is 12:00 in UTC."),
    ])
    .await;
    upstream.set_models(Models::List(vec![
        "nomic-embed-text:latest".to_owned(),
        "qwen2.5:7b".to_owned(),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let ran = init_async(
        dir.path(),
        &["--kind", "ollama", "--base-url", &upstream.base_url],
        &[],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout
            .contains("no `model` is set: using qwen2.5:7b, the first chat model it lists"),
        "{ran}"
    );
    assert!(
        ran.stdout.contains("the provider works with rojos"),
        "{ran}"
    );
    assert_eq!(upstream.received()[0].body["model"], "qwen2.5:7b");
    upstream.assert_consumed();
}
