//! What an MCP server is, as `[mcp.servers.NAME]` configures it (`docs/mcp.md`, "MCP servers
//! as tool sources"): reached over stdio (`command`) or Streamable HTTP (`url`), and whether
//! it runs once per project. The host's config reads these from its file.

use std::{collections::BTreeMap, path::Path, time::Duration};

use rojos_llm::Secret;

/// The placeholder that makes a server per-project: replaced by the project's root folder
/// (`docs/mcp.md`, "Per-project servers").
pub const PROJECT_ROOT: &str = "{project_root}";

/// One configured MCP server.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    /// The name in `[mcp.servers.NAME]`, the prefix of its tools' names.
    pub name: String,
    /// How it is reached: a process of ours, or a URL.
    pub transport: McpTransport,
    /// How long starting it (process or connection, MCP handshake and tool list) may take.
    pub start_timeout: Duration,
    /// Set when a stdio server's `args` or `env` hold `{project_root}`: one process per
    /// project.
    pub per_project: Option<PerProject>,
}

/// How an MCP server is reached.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout (`command`).
    Stdio(StdioServer),
    /// A Streamable HTTP endpoint (`url`).
    Http(HttpServer),
}

/// A stdio server's process.
#[derive(Debug, Clone)]
pub struct StdioServer {
    /// The program to start (looked up in `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it: `env`'s plain values and `env_from`'s values read from the
    /// host's environment (secrets), on top of a few inherited ones (`docs/mcp.md`).
    pub env: BTreeMap<String, Secret>,
}

/// A Streamable HTTP server's endpoint.
#[derive(Debug, Clone)]
pub struct HttpServer {
    /// The endpoint, `http://` or `https://`.
    pub url: String,
    /// Headers sent with every request: `headers`' plain values and `headers_from`'s values
    /// read from the host's environment (secrets, e.g. `Authorization`).
    pub headers: BTreeMap<String, Secret>,
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
    /// This config with `{project_root}` replaced by `root` in a stdio server's `args` and
    /// `env` values (an HTTP server has none).
    #[must_use]
    pub fn for_root(&self, root: &Path) -> McpServerConfig {
        let root = root.to_string_lossy();
        let mut config = self.clone();
        let McpTransport::Stdio(stdio) = &mut config.transport else {
            return config;
        };
        for arg in &mut stdio.args {
            *arg = arg.replace(PROJECT_ROOT, &root);
        }
        for value in stdio.env.values_mut() {
            if value.expose().contains(PROJECT_ROOT) {
                *value = Secret::new(value.expose().replace(PROJECT_ROOT, &root));
            }
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_root_is_replaced_in_args_and_env_values() {
        let config = McpServerConfig {
            name: "docs".to_owned(),
            transport: McpTransport::Stdio(StdioServer {
                command: "x".to_owned(),
                args: vec!["--root={project_root}".to_owned(), "-v".to_owned()],
                env: BTreeMap::from([("DIR".to_owned(), Secret::new("{project_root}/sub"))]),
            }),
            start_timeout: Duration::from_secs(1),
            per_project: None,
        };
        let config = config.for_root(Path::new("/s/p/root"));
        let McpTransport::Stdio(stdio) = config.transport else {
            panic!("a stdio server stays one")
        };
        assert_eq!(stdio.args, ["--root=/s/p/root", "-v"]);
        assert_eq!(stdio.env["DIR"].expose(), "/s/p/root/sub");
    }
}
