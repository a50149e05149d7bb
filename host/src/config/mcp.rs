//! `[mcp.servers.NAME]`: the stdio MCP servers whose tools join the registry
//! (`docs/mcp.md`, "MCP servers as tool sources"). A server's name becomes the prefix of its
//! tools' names, so it is held to the characters a tool name may use.

use std::{collections::BTreeMap, path::Path, time::Duration};

use super::{invalid, raw::RawMcpServer, seconds_key, ConfigError, EnvLookup};
use crate::secret::Secret;

/// The placeholder that makes a server per-project: replaced by the project's root folder
/// (`docs/mcp.md`, "Per-project servers").
const PROJECT_ROOT: &str = "{project_root}";

/// One configured stdio MCP server.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    /// The name in `[mcp.servers.NAME]`, the prefix of its tools' names.
    pub name: String,
    /// The program to start (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it: `env`'s plain values and `env_from`'s values read from the
    /// host's environment (secrets), on top of a few inherited ones (`docs/mcp.md`).
    pub env: BTreeMap<String, Secret>,
    /// How long starting it (process and MCP handshake and tool list) may take.
    pub start_timeout: Duration,
    /// Set when `args` or `env` hold `{project_root}`: one process per project.
    pub per_project: Option<PerProject>,
}

/// The limits of a per-project server's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerProject {
    /// At most this many run at once (`max_running`, default 8).
    pub max_running: usize,
    /// One idle this long is stopped (`idle_shutdown_secs`, default 300 s).
    pub idle_shutdown: Duration,
}

impl McpServerConfig {
    /// This config with `{project_root}` replaced by `root` in `args` and `env` values.
    #[must_use]
    pub fn for_root(&self, root: &Path) -> McpServerConfig {
        let root = root.to_string_lossy();
        let mut config = self.clone();
        for arg in &mut config.args {
            *arg = arg.replace(PROJECT_ROOT, &root);
        }
        for value in config.env.values_mut() {
            if value.expose().contains(PROJECT_ROOT) {
                *value = Secret::new(value.expose().replace(PROJECT_ROOT, &root));
            }
        }
        config
    }
}

/// Parses every `[mcp.servers.*]` table.
pub(super) fn parse_servers(
    raw: &BTreeMap<String, RawMcpServer>,
    env: EnvLookup<'_>,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    raw.iter()
        .map(|(name, server)| parse_server(name, server, env))
        .collect()
}

fn parse_server(
    name: &str,
    raw: &RawMcpServer,
    env: EnvLookup<'_>,
) -> Result<McpServerConfig, ConfigError> {
    let key = format!("mcp.servers.{name}");
    if !valid_server_name(name) {
        return Err(invalid(
            &key,
            "a server name must be 1 to 32 letters, digits, '-' or '_', with no \"__\" (it \
             prefixes its tools' names)",
        ));
    }
    if raw.command.trim().is_empty() {
        return Err(invalid(format!("{key}.command"), "must not be empty"));
    }
    let mut variables: BTreeMap<String, Secret> = raw
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Secret::new(v.clone())))
        .collect();
    for (variable, source) in &raw.env_from {
        let Some(value) = env(source) else {
            return Err(invalid(
                format!("{key}.env_from.{variable}"),
                format!("the environment variable {source} is not set"),
            ));
        };
        variables.insert(variable.clone(), Secret::new(value));
    }
    let start_timeout = seconds_key(
        &format!("{key}.start_timeout_secs"),
        raw.start_timeout_secs,
        Duration::from_secs(30),
        600.0,
    )?;
    let per_project = raw.args.iter().any(|a| a.contains(PROJECT_ROOT))
        || raw.env.values().any(|v| v.contains(PROJECT_ROOT));
    let per_project = if per_project {
        Some(parse_per_project(&key, raw)?)
    } else if raw.max_running.is_some() || raw.idle_shutdown_secs.is_some() {
        return Err(invalid(
            &key,
            "max_running and idle_shutdown_secs apply only to a server whose args or env use \
             {project_root}",
        ));
    } else {
        None
    };
    Ok(McpServerConfig {
        name: name.to_owned(),
        command: raw.command.clone(),
        args: raw.args.clone(),
        env: variables,
        start_timeout,
        per_project,
    })
}

fn parse_per_project(key: &str, raw: &RawMcpServer) -> Result<PerProject, ConfigError> {
    let max_running = raw.max_running.unwrap_or(8);
    if !(1..=256).contains(&max_running) {
        return Err(invalid(format!("{key}.max_running"), "must be 1 to 256"));
    }
    let idle_shutdown = seconds_key(
        &format!("{key}.idle_shutdown_secs"),
        raw.idle_shutdown_secs,
        Duration::from_secs(300),
        86_400.0,
    )?;
    Ok(PerProject {
        max_running,
        idle_shutdown,
    })
}

/// 1 to 32 of `[A-Za-z0-9_-]`, without `__` (the separator of the naming rule).
fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_are_held_to_the_tool_name_characters() {
        assert!(valid_server_name("files"));
        assert!(valid_server_name("git-hub_2"));
        assert!(!valid_server_name("a__b"));
        assert!(!valid_server_name("a.b"));
        assert!(!valid_server_name(""));
        assert!(!valid_server_name(&"x".repeat(33)));
    }

    #[test]
    fn project_root_is_replaced_in_args_and_env_values() {
        let config = McpServerConfig {
            name: "docs".to_owned(),
            command: "x".to_owned(),
            args: vec!["--root={project_root}".to_owned(), "-v".to_owned()],
            env: BTreeMap::from([("DIR".to_owned(), Secret::new("{project_root}/sub"))]),
            start_timeout: Duration::from_secs(1),
            per_project: None,
        };
        let config = config.for_root(Path::new("/s/p/root"));
        assert_eq!(config.args, ["--root=/s/p/root", "-v"]);
        assert_eq!(config.env["DIR"].expose(), "/s/p/root/sub");
    }
}
