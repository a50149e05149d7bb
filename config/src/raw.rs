//! `rojos.toml` exactly as written: one serde type per table, unknown keys refused (the
//! error names the key). `super` turns these into the validated [`super::Config`].

use std::{collections::BTreeMap, path::PathBuf};

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) server: RawServer,
    #[serde(default)]
    pub(super) auth: RawAuth,
    #[serde(default)]
    pub(super) plugins: RawPlugins,
    #[serde(default)]
    pub(super) limits: RawLimits,
    #[serde(default)]
    pub(super) providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub(super) rojos: BTreeMap<String, RawRojo>,
    #[serde(default)]
    pub(super) store: RawStore,
    #[serde(default)]
    pub(super) mcp: RawMcp,
}

/// `[mcp]`, see `super::mcp`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub(super) servers: BTreeMap<String, RawMcpServer>,
}

/// `[mcp.servers.NAME]`: one MCP server, stdio (`command`) or Streamable HTTP (`url`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) env_from: BTreeMap<String, String>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) headers_from: BTreeMap<String, String>,
    pub(super) start_timeout_secs: Option<f64>,
    pub(super) max_running: Option<usize>,
    pub(super) idle_shutdown_secs: Option<f64>,
}

/// `[store]`, see `super::store`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    pub(super) backend: Option<String>,
    pub(super) url: Option<String>,
    pub(super) password_env: Option<String>,
    pub(super) pool_size: Option<usize>,
    pub(super) connect_timeout_secs: Option<f64>,
    pub(super) query_timeout_secs: Option<f64>,
    pub(super) tls: Option<String>,
    pub(super) ca_file: Option<PathBuf>,
    pub(super) run_lease_secs: Option<f64>,
    pub(super) prepared_statements: Option<bool>,
    pub(super) share_runs: Option<bool>,
    pub(super) search_timeout_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) bind: Option<String>,
    pub(super) storage: Option<PathBuf>,
    pub(super) max_body_bytes: Option<usize>,
    pub(super) max_concurrent_chats: Option<usize>,
    pub(super) max_chats_per_token: Option<usize>,
    pub(super) max_connections: Option<usize>,
    pub(super) header_read_timeout_secs: Option<f64>,
    pub(super) idle_timeout_secs: Option<f64>,
    pub(super) stream_write_timeout_secs: Option<f64>,
    pub(super) worker_threads: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    pub(super) tokens: Vec<RawToken>,
    pub(super) rate_limit_per_minute: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToken {
    pub(super) token: Option<String>,
    pub(super) token_env: Option<String>,
    pub(super) projects: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugins {
    #[serde(default)]
    pub(super) load: Vec<PathBuf>,
    pub(super) dir: Option<PathBuf>,
    pub(super) call_timeout_secs: Option<f64>,
    pub(super) max_concurrent_calls: Option<usize>,
    pub(super) isolation: Option<String>,
    pub(super) sandbox: Option<String>,
    pub(super) worker_memory_mib: Option<u64>,
    pub(super) worker_cpu_secs: Option<u64>,
    pub(super) worker_open_files: Option<u64>,
    pub(super) worker_processes: Option<u64>,
    pub(super) worker_idle_secs: Option<f64>,
    pub(super) worker_start: Option<String>,
    pub(super) worker_user: Option<String>,
    pub(super) quarantine_after: Option<u32>,
    pub(super) quarantine_window_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_read_bytes: Option<u64>,
    pub(super) max_write_bytes: Option<u64>,
    pub(super) max_list_entries: Option<u64>,
    pub(super) max_result_bytes: Option<usize>,
    pub(super) max_tool_calls_per_turn: Option<usize>,
    pub(super) max_turn_result_bytes: Option<usize>,
    pub(super) max_run_result_bytes: Option<usize>,
    pub(super) max_model_turn_bytes: Option<usize>,
    pub(super) max_conversation_bytes: Option<usize>,
    pub(super) max_conversation_page_bytes: Option<usize>,
    pub(super) max_upload_bytes: Option<usize>,
    pub(super) checkpoint_bytes: Option<usize>,
    pub(super) checkpoint_record_bytes: Option<usize>,
    pub(super) checkpoint_memory_bytes: Option<usize>,
    pub(super) approval_timeout_secs: Option<f64>,
    pub(super) unattended_run_secs: Option<f64>,
    pub(super) max_mcp_sessions: Option<usize>,
    pub(super) max_mcp_sessions_per_token: Option<usize>,
    pub(super) mcp_session_idle_secs: Option<f64>,
    pub(super) body_timeout_secs: Option<f64>,
    pub(super) max_transfers: Option<usize>,
    pub(super) max_transfers_per_token: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub(super) kind: Option<String>,
    pub(super) base_url: Option<String>,
    pub(super) model: Option<String>,
    pub(super) api_key_env: Option<String>,
    pub(super) connect_timeout_secs: Option<f64>,
    pub(super) idle_timeout_secs: Option<f64>,
    pub(super) turn_timeout_secs: Option<f64>,
    pub(super) max_attempts: Option<u32>,
    pub(super) empty_content: Option<RawEmptyContent>,
    pub(super) context_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawEmptyContent {
    Null,
    EmptyString,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRojo {
    pub(super) provider: RawNames,
    pub(super) system_prompt: Option<String>,
    #[serde(default = "all_tools")]
    pub(super) tools: RawNames,
    pub(super) max_steps: Option<u32>,
    pub(super) approve: Option<RawNames>,
    pub(super) context_tokens: Option<u64>,
    pub(super) compact_at_percent: Option<u8>,
}

/// A name, or a list of names (a rojo's `provider` and `tools`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawNames {
    One(String),
    List(Vec<String>),
}

fn all_tools() -> RawNames {
    RawNames::One("*".to_owned())
}
