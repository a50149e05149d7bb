//! The tests of `rojos.toml` as a whole.

use std::collections::BTreeSet;

use super::*;

const GOOD: &str = r#"
[server]
bind = "127.0.0.1:9000"
storage = "data"

[[auth.tokens]]
token_env = "TEST_TOKEN"
projects = ["demo", "other"]

[plugins]
load = ["libs/liba.so", "/abs/libb.so"]
dir = "plugins.d"

[providers.local]
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5:7b"
api_key_env = "TEST_KEY"

[rojos.default]
provider = "local"
tools = ["list_files"]
"#;

fn env(name: &str) -> Option<String> {
    match name {
        "TEST_TOKEN" => Some("tok-123456789".into()),
        "TEST_KEY" => Some("sk-secret".into()),
        _ => None,
    }
}

fn parse_file(text: &str) -> Result<ConfigFile, ConfigError> {
    ConfigFile::parse(
        text,
        Path::new("/etc/rojos/rojos.toml"),
        Path::new("/etc/rojos"),
        &env,
    )
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_file(text).map(|file| file.config)
}

fn parse_live(text: &str) -> Result<LiveConfig, ConfigError> {
    parse_file(text).map(|file| file.live)
}

fn error(text: &str) -> String {
    parse(text)
        .expect_err("config should be refused")
        .to_string()
}

#[test]
fn relative_paths_resolve_against_the_config_folder() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.storage, Path::new("/etc/rojos/data"));
    assert_eq!(
        c.plugins.load,
        vec![
            PathBuf::from("/etc/rojos/libs/liba.so"),
            PathBuf::from("/abs/libb.so")
        ]
    );
    assert_eq!(
        c.plugins.dir.as_deref(),
        Some(Path::new("/etc/rojos/plugins.d"))
    );
    assert_eq!(c.bind.port(), 9000);
}

#[test]
fn secrets_come_from_the_environment_and_stay_redacted() {
    let ConfigFile { config: c, live } = parse_file(GOOD).unwrap();
    assert_eq!(c.tokens[0].token.expose(), "tok-123456789");
    assert_eq!(
        live.providers["local"]
            .provider
            .api_key
            .as_ref()
            .unwrap()
            .expose(),
        "sk-secret"
    );
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("tok-123456789") && !debug.contains("sk-secret"),
        "{debug}"
    );
}

#[test]
fn an_unknown_key_is_an_error_naming_it() {
    let e = error("[server]\nbnd = \"127.0.0.1:1\"\n");
    assert!(e.contains("unknown field `bnd`"), "{e}");
    let e = error("[rojos.default]\nprovider = \"x\"\ntols = []\n");
    assert!(e.contains("unknown field `tols`"), "{e}");
}

#[test]
fn a_bad_value_is_an_error_naming_the_key() {
    let e = error(&GOOD.replace("127.0.0.1:9000", "nowhere"));
    assert_eq!(e, r#"server.bind: not a socket address: "nowhere""#);
    let e = error(&GOOD.replace("provider = \"local\"", "provider = \"locl\""));
    assert_eq!(
        e,
        r#"rojos.default.provider: no provider named "locl" (the file declares: local)"#
    );
    let e = error(&GOOD.replace("provider = \"local\"", "provider = []"));
    assert_eq!(e, "rojos.default.provider: name at least one provider");
    let e = error(&GOOD.replace("\"demo\", \"other\"", "\"../etc\""));
    assert!(e.starts_with("auth.tokens[0].projects:"), "{e}");
    let e = error(&GOOD.replace("[plugins]", "[limits]\nmax_read_bytes = 0\n[plugins]"));
    assert_eq!(e, "limits.max_read_bytes: must be at least 1");
    let e = error(&GOOD.replace("[plugins]", "[plugins]\ncall_timeout_secs = \"ten\""));
    assert!(e.contains("call_timeout_secs"), "{e}");
}

#[test]
fn a_missing_key_leaves_the_provider_configured_but_unusable() {
    let live = parse_live(&GOOD.replace("TEST_KEY", "MISSING_KEY")).unwrap();
    let local = &live.providers["local"];
    assert_eq!(local.key_env.as_deref(), Some("MISSING_KEY"));
    assert!(local.missing_key);
    assert!(local.provider.api_key.is_none());
    let live = parse_live(GOOD).unwrap();
    assert!(!live.providers["local"].missing_key);
}

#[test]
fn a_kind_fills_in_url_key_variable_model_and_quirks() {
    let file =
        |provider: &str| format!("[providers.p]\n{provider}\n[rojos.default]\nprovider = \"p\"\n");
    let live = parse_live(&file("kind = \"gemini\"")).unwrap();
    let gemini = &live.providers["p"];
    assert_eq!(gemini.kind, Some(rojos_llm::ProviderKind::Gemini));
    assert_eq!(
        gemini.provider.base_url,
        rojos_llm::ProviderKind::Gemini.base_url()
    );
    assert_eq!(gemini.provider.model, "gemini-2.5-flash");
    assert_eq!(gemini.key_env.as_deref(), Some("GEMINI_API_KEY"));
    assert!(gemini.missing_key);
    assert_eq!(
        gemini.provider.empty_content,
        rojos_llm::EmptyContent::EmptyString
    );

    let given = "kind = \"openai\"\nbase_url = \"http://proxy:9/v1\"\nmodel = \"m\"\napi_key_env = \"TEST_KEY\"";
    let live = parse_live(&file(given)).unwrap();
    let openai = &live.providers["p"];
    assert_eq!(openai.provider.base_url, "http://proxy:9/v1");
    assert_eq!(openai.provider.model, "m");
    assert!(!openai.missing_key);

    let live = parse_live(&file("kind = \"ollama\"")).unwrap();
    let ollama = &live.providers["p"];
    assert!(ollama.model_from_list && ollama.key_env.is_none() && !ollama.missing_key);
    assert_eq!(ollama.provider.base_url, "http://127.0.0.1:11434/v1");

    let e = error(&file("kind = \"olama\""));
    assert!(
        e.starts_with("providers.p.kind: unknown kind \"olama\" (known: openai, anthropic,"),
        "{e}"
    );
    let e = error(&file("model = \"m\""));
    assert!(e.starts_with("providers.p.base_url: missing"), "{e}");
    let e = error(&file("base_url = \"http://h/v1\""));
    assert!(e.starts_with("providers.p.model: missing"), "{e}");
}

#[test]
fn a_rojo_may_name_several_providers_in_order() {
    let text = GOOD.replace("provider = \"local\"", "provider = [\"local\", \"spare\"]")
        + "[providers.spare]\nkind = \"lmstudio\"\n";
    let live = parse_live(&text).unwrap();
    assert_eq!(live.rojos["default"].providers, ["local", "spare"]);
}

#[test]
fn a_refused_base_url_is_named_without_its_key() {
    let e = error(&GOOD.replace(
        "http://127.0.0.1:11434/v1",
        "ftp://me:pa55word@h/v1?key=AIza-secret",
    ));
    assert_eq!(
        e,
        r#"providers.local.base_url: must start with http:// or https://, got "ftp://<redacted>@h/v1?key=<redacted>""#
    );
    let e = error(&GOOD.replace("http://127.0.0.1:11434/v1", "http://?key=AIza-secret"));
    assert!(!e.contains("AIza-secret"), "{e}");
}

#[test]
fn tools_accept_a_star_or_a_list_and_unknown_names_are_refused() {
    let c = parse_live(GOOD).unwrap();
    assert_eq!(
        c.rojos["default"].tools,
        ToolSelection::Only(BTreeSet::from(["list_files".to_owned()]))
    );
    let star = parse_live(&GOOD.replace(r#"tools = ["list_files"]"#, r#"tools = "*""#)).unwrap();
    assert_eq!(star.rojos["default"].tools, ToolSelection::All);
    let one =
        parse_live(&GOOD.replace(r#"tools = ["list_files"]"#, r#"tools = "list_files""#)).unwrap();
    assert_eq!(
        one.rojos["default"].tools,
        ToolSelection::Only(BTreeSet::from(["list_files".to_owned()])),
        "one name, not a star"
    );
    let listed_star = parse_live(&GOOD.replace(
        r#"tools = ["list_files"]"#,
        r#"tools = ["list_files", "*"]"#,
    ))
    .unwrap();
    assert_eq!(listed_star.rojos["default"].tools, ToolSelection::All);
    assert!(c.check_tools(&["list_files"], &[]).is_ok());
    let e = c
        .check_tools(&["delete_path", "move_path"], &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        r#"rojos.default.tools: no loaded plugin provides a tool named "list_files" (loaded: delete_path, move_path)"#
    );
}

#[test]
fn chat_limits_are_read_and_checked() {
    let c = parse(
        &GOOD
            .replace(
                "storage = \"data\"",
                "storage = \"data\"\nmax_concurrent_chats = 16",
            )
            .replace(
                "[[auth.tokens]]",
                "[auth]\nrate_limit_per_minute = 30\n\n[[auth.tokens]]",
            ),
    )
    .unwrap();
    assert_eq!(c.max_concurrent_chats, 16);
    assert_eq!(c.rate_limit_per_minute, Some(30));
    let defaults = parse("").unwrap();
    assert_eq!(defaults.max_concurrent_chats, 1024);
    assert_eq!(defaults.rate_limit_per_minute, None);
    let e = error("[server]\nmax_concurrent_chats = 0\n");
    assert_eq!(e, "server.max_concurrent_chats: must be at least 1");
    let e = error("[auth]\nrate_limit_per_minute = 0\n");
    assert_eq!(
        e,
        "auth.rate_limit_per_minute: must be at least 1 (leave it out for no rate limit)"
    );
    let e = error("[auth]\nrate_limit_per_minute = -1\n");
    assert!(e.contains("rate_limit_per_minute"), "{e}");
}

#[test]
fn worker_threads_default_to_one_per_core_and_take_a_count_from_one_to_1024() {
    assert_eq!(parse("").unwrap().worker_threads, None);
    let one = parse("[server]\nworker_threads = 1\n").unwrap();
    assert_eq!(one.worker_threads, NonZeroUsize::new(1));
    let most = parse("[server]\nworker_threads = 1024\n").unwrap();
    assert_eq!(most.worker_threads, NonZeroUsize::new(1024));
    for refused in ["0", "1025"] {
        let e = error(&format!("[server]\nworker_threads = {refused}\n"));
        assert_eq!(e, "server.worker_threads: must be between 1 and 1024");
    }
    let e = error("[server]\nworker_threads = -1\n");
    assert!(e.contains("worker_threads"), "{e}");
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    let c = parse("").unwrap();
    assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
    assert_eq!(c.limits, Limits::default());
    assert_eq!(c.plugins.call_timeout, Duration::from_secs(10));
    assert!(c.tokens.is_empty() && parse_live("").unwrap().rojos.is_empty());
    assert_eq!(c.http, HttpLimits::default());
    assert_eq!(c.budgets, RunBudgets::default());
    assert_eq!(c.max_chats_per_token, 32);
    assert_eq!(c.max_conversation_page_bytes, 1 << 20);
    assert_eq!(c.max_upload_bytes, 10 << 20);
    assert_eq!(c.transfers, TransferLimits::default());
    assert_eq!(c.checkpoint_bytes, 256 << 20);
    assert_eq!(c.checkpoint_record_bytes, 64 << 20);
    assert_eq!(c.checkpoint_memory_bytes, 512 << 20);
}

#[test]
fn a_rojo_compacts_at_a_percent_from_0_to_100() {
    let at = |text: &str| {
        parse_live(&format!("{GOOD}{text}")).map(|live| live.rojos["default"].compact_at_percent)
    };
    assert_eq!(
        at("").unwrap(),
        rojos_agent::context::DEFAULT_COMPACT_AT_PERCENT
    );
    assert_eq!(at("compact_at_percent = 0\n").unwrap(), 0);
    assert_eq!(at("compact_at_percent = 100\n").unwrap(), 100);
    let e = at("compact_at_percent = 101\n").unwrap_err().to_string();
    assert!(e.contains("rojos.default.compact_at_percent"), "{e}");
    assert!(e.contains("must be 0 (never compact) to 100"), "{e}");
}

#[test]
fn a_context_window_below_the_least_any_request_needs_is_refused_for_a_provider_and_a_rojo() {
    let least = rojos_agent::context::MIN_CONTEXT_TOKENS;
    let provider = |tokens: u64| {
        GOOD.replace(
            "api_key_env = \"TEST_KEY\"",
            &format!("api_key_env = \"TEST_KEY\"\ncontext_tokens = {tokens}"),
        )
    };
    let rojo = |tokens: u64| format!("{GOOD}context_tokens = {tokens}\n");

    let e = error(&provider(least - 1));
    assert!(e.contains("providers.local.context_tokens"), "{e}");
    assert!(e.contains(&format!("must be at least {least}")), "{e}");
    let e = error(&rojo(least - 1));
    assert!(e.contains("rojos.default.context_tokens"), "{e}");
    assert!(e.contains(&format!("must be at least {least}")), "{e}");

    let live = parse_live(&provider(least)).unwrap();
    assert_eq!(live.providers["local"].context_tokens, Some(least));
    let live = parse_live(&rojo(least)).unwrap();
    assert_eq!(live.rojos["default"].context_tokens, Some(least));
    let live = parse_live(GOOD).unwrap();
    assert_eq!(live.providers["local"].context_tokens, None);
    assert_eq!(live.rojos["default"].context_tokens, None);
}

#[test]
fn the_transfer_limits_are_read_and_checked() {
    let c = parse(
        "[limits]\nbody_timeout_secs = 2.5\nmax_transfers = 3\nmax_transfers_per_token = 2\n",
    )
    .unwrap();
    assert_eq!(
        c.transfers,
        TransferLimits {
            body_timeout: Duration::from_millis(2500),
            max_transfers: 3,
            max_transfers_per_token: 2,
        }
    );
    assert_eq!(c.transfers.buffered_bytes(), 3 * TRANSFER_BUFFER_BYTES);
    for (toml, expected) in [
        (
            "body_timeout_secs = 0",
            "limits.body_timeout_secs: must be between 0 and 3600 seconds",
        ),
        (
            "max_transfers = 0",
            "limits.max_transfers: must be at least 1",
        ),
        (
            "max_transfers_per_token = 0",
            "limits.max_transfers_per_token: must be at least 1",
        ),
    ] {
        let e = parse(&format!("[limits]\n{toml}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{e}");
    }
}

#[test]
fn the_upload_limit_is_read_and_must_be_positive() {
    let c = parse("[limits]\nmax_upload_bytes = 2048\n").unwrap();
    assert_eq!(c.max_upload_bytes, 2048);
    let e = parse("[limits]\nmax_upload_bytes = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("limits.max_upload_bytes: must be at least 1"),
        "{e}"
    );
}

#[test]
fn the_model_turn_limit_reaches_every_provider_client() {
    let limits = |text: &str| parse_live(text).unwrap().providers["local"].provider.limits;
    let default = limits(GOOD);
    assert_eq!(default.max_turn_bytes, 2 << 20);
    assert_eq!(
        default.max_argument_bytes,
        rojos_llm::Limits::default().max_argument_bytes
    );
    let low = limits(&format!("{GOOD}\n[limits]\nmax_model_turn_bytes = 8192\n"));
    assert_eq!(low.max_turn_bytes, 8192);
    assert_eq!(
        low.max_argument_bytes, 8192,
        "one call's arguments fit in a turn"
    );
}

#[test]
fn hardening_keys_are_read_and_checked() {
    let c = parse(
        "[server]\nheader_read_timeout_secs = 2.5\nidle_timeout_secs = 5\nmax_connections = 100\n\
             stream_write_timeout_secs = 3\nmax_chats_per_token = 4\n\
             [limits]\nmax_tool_calls_per_turn = 3\nmax_turn_result_bytes = 200000\n\
             max_run_result_bytes = 300000\nmax_model_turn_bytes = 5000\n\
             max_conversation_bytes = 70000\nmax_conversation_page_bytes = 2048\n",
    )
    .unwrap();
    assert_eq!(c.http.header_read_timeout, Duration::from_millis(2500));
    assert_eq!(c.http.idle_timeout, Duration::from_secs(5));
    assert_eq!(c.http.max_connections, 100);
    assert_eq!(c.http.stream_write_timeout, Duration::from_secs(3));
    assert_eq!(c.max_chats_per_token, 4);
    assert_eq!(
        c.budgets,
        RunBudgets {
            max_tool_calls_per_turn: 3,
            max_turn_result_bytes: 200_000,
            max_run_result_bytes: 300_000,
            max_model_turn_bytes: 5000,
            max_conversation_bytes: 70_000,
        }
    );
    assert_eq!(c.max_conversation_page_bytes, 2048);
    for (text, message) in [
        (
            "[server]\nheader_read_timeout_secs = 0\n",
            "server.header_read_timeout_secs: must be between 0 and 3600 seconds",
        ),
        (
            "[server]\nmax_connections = 3\n",
            "server.max_connections: must be at least 16",
        ),
        (
            "[server]\nmax_chats_per_token = 0\n",
            "server.max_chats_per_token: must be at least 1",
        ),
        (
            "[limits]\nmax_tool_calls_per_turn = 0\n",
            "limits.max_tool_calls_per_turn: must be at least 1",
        ),
        (
            "[limits]\nmax_turn_result_bytes = 1000\n",
            "limits.max_turn_result_bytes: must be at least 131072",
        ),
        (
            "[limits]\nmax_turn_result_bytes = 300000\nmax_run_result_bytes = 200000\n",
            "limits.max_run_result_bytes: must be at least limits.max_turn_result_bytes",
        ),
    ] {
        assert_eq!(error(text), message, "{text}");
    }
}

#[test]
fn mcp_servers_are_read_with_secrets_from_the_environment() {
    let text = format!(
            "{GOOD}\n[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = {{ LEVEL = \"warn\" }}\nenv_from = {{ TOKEN = \"TEST_KEY\" }}\n"
        );
    let config = parse(&text).unwrap();
    let [server] = config.mcp_servers.as_slice() else {
        panic!("one server expected: {:?}", config.mcp_servers)
    };
    assert_eq!(server.name, "files");
    let McpTransport::Stdio(stdio) = &server.transport else {
        panic!("a command server is a stdio one: {server:?}")
    };
    assert_eq!(stdio.args, ["-y", "server"]);
    assert_eq!(stdio.env["LEVEL"].expose(), "warn");
    assert_eq!(stdio.env["TOKEN"].expose(), "sk-secret");
    assert_eq!(server.start_timeout, Duration::from_secs(30));
    assert!(!format!("{server:?}").contains("sk-secret"));
}

#[test]
fn bad_mcp_servers_are_refused_naming_the_key() {
    let with = |table: &str| error(&format!("{GOOD}\n{table}"));
    assert_eq!(
        with("[mcp.servers.files]\ncommand = \"npx\"\nenv_from = { TOKEN = \"NOPE\" }"),
        "mcp.servers.files.env_from.TOKEN: the environment variable NOPE is not set"
    );
    assert_eq!(
        with(
            "[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"{project_root}\"]\nmax_running = 0"
        ),
        "mcp.servers.files.max_running: must be 1 to 256"
    );
    assert!(
        with("[mcp.servers.files]\ncommand = \"npx\"\nidle_shutdown_secs = 5")
            .starts_with("mcp.servers.files: max_running and idle_shutdown_secs apply only")
    );
    assert!(with("[mcp.servers.a__b]\ncommand = \"x\"")
        .starts_with("mcp.servers.a__b: a server name must be"));
    assert_eq!(
        with("[mcp.servers.files]\ncommand = \" \""),
        "mcp.servers.files.command: must not be empty"
    );
}

#[test]
fn url_servers_are_read_with_headers_from_the_environment() {
    let config = parse(&format!(
            "{GOOD}\n[mcp.servers.peer]\nurl = \"https://mcp.example.com/mcp\"\nheaders = {{ X-Team = \"a\" }}\nheaders_from = {{ Authorization = \"TEST_KEY\" }}\nstart_timeout_secs = 5\n"
        ))
        .unwrap();
    let [server] = config.mcp_servers.as_slice() else {
        panic!("one server expected: {:?}", config.mcp_servers)
    };
    let McpTransport::Http(http) = &server.transport else {
        panic!("a url server is an HTTP one: {server:?}")
    };
    assert_eq!(http.url, "https://mcp.example.com/mcp");
    assert_eq!(http.headers["X-Team"].expose(), "a");
    assert_eq!(http.headers["Authorization"].expose(), "sk-secret");
    assert_eq!(server.start_timeout, Duration::from_secs(5));
    assert!(server.per_project.is_none());
    assert!(!format!("{server:?}").contains("sk-secret"));
}

#[test]
fn bad_url_servers_are_refused_saying_why() {
    let with = |table: &str| error(&format!("{GOOD}\n[mcp.servers.peer]\n{table}"));
    assert!(with("command = \"x\"\nurl = \"http://h/mcp\"")
        .starts_with("mcp.servers.peer: set either command (a stdio server Rojos starts) or url"));
    assert!(with("args = [\"x\"]")
        .starts_with("mcp.servers.peer: set command (a stdio server Rojos starts) or url"));
    assert!(with("url = \"http://h/mcp\"\nargs = [\"x\"]")
        .starts_with("mcp.servers.peer: args, env and env_from apply only to a command server"));
    assert!(
        with("url = \"http://h/mcp\"\nenv_from = { A = \"TEST_KEY\" }")
            .starts_with("mcp.servers.peer: args, env and env_from apply only")
    );
    assert!(with("command = \"x\"\nheaders = { A = \"b\" }")
        .starts_with("mcp.servers.peer: headers and headers_from apply only to a url server"));
    assert_eq!(
        with("url = \"ftp://h/mcp\""),
        "mcp.servers.peer.url: \"ftp://h/mcp\" is not an http:// or https:// URL with a host"
    );
    assert!(with("url = \"not a url\"").starts_with("mcp.servers.peer.url: \"not a url\" is not"));
    assert!(with("url = \"http://h/{project_root}/mcp\"")
        .starts_with("mcp.servers.peer: {project_root} is not replaced in a url"));
    assert_eq!(
        with("url = \"http://h/mcp\"\nheaders_from = { Authorization = \"NOPE\" }"),
        "mcp.servers.peer.headers_from.Authorization: the environment variable NOPE is not set"
    );
    assert!(
        with("url = \"http://h/mcp\"\nheaders = { \"bad name\" = \"v\" }")
            .starts_with("mcp.servers.peer.headers.bad name: is not a valid HTTP header name")
    );
}

#[test]
fn a_server_wildcard_enables_only_that_servers_tools() {
    let only = ToolSelection::Only(BTreeSet::from(["files__*".to_owned(), "x".to_owned()]));
    assert!(only.allows("files__read"));
    assert!(only.allows("x"));
    assert!(!only.allows("files_read"));
    assert!(!only.allows("other__read"));
    let c = parse_live(&GOOD.replace(r#"tools = ["list_files"]"#, r#"tools = ["files__read"]"#))
        .unwrap();
    assert!(c.check_tools(&[], &["files"]).is_ok());
    assert!(c.check_tools(&[], &["other"]).is_err());
}

#[test]
fn mcp_sessions_have_limits_and_an_idle_time_longer_than_a_call() {
    let defaults = parse(GOOD).unwrap().mcp_sessions;
    assert_eq!(defaults, McpSessionLimits::default());
    let long_calls = GOOD.replace(
        "dir = \"plugins.d\"\n",
        "dir = \"plugins.d\"\ncall_timeout_secs = 600\n",
    );
    assert_eq!(
        parse(&long_calls).unwrap().mcp_sessions.idle,
        Duration::from_secs(1200)
    );
    let set = format!(
        "{GOOD}\n[limits]\nmax_mcp_sessions = 3\nmax_mcp_sessions_per_token = 2\n\
             mcp_session_idle_secs = 30\n"
    );
    let limits = parse(&set).unwrap().mcp_sessions;
    assert_eq!(
        (
            limits.max_sessions,
            limits.max_sessions_per_token,
            limits.idle
        ),
        (3, 2, Duration::from_secs(30))
    );
    assert_eq!(
        error(&format!("{GOOD}\n[limits]\nmcp_session_idle_secs = 10\n")),
        "limits.mcp_session_idle_secs: must be longer than [plugins] call_timeout_secs \
             (10 s): a session's idle time runs while one of its tool calls does"
    );
    assert_eq!(
        error(&format!(
            "{GOOD}\n[limits]\nmax_mcp_sessions_per_token = 0\n"
        )),
        "limits.max_mcp_sessions_per_token: must be at least 1"
    );
}
