//! `[mcp.servers.NAME]`: the MCP servers whose tools join the registry (`docs/mcp.md`, "MCP
//! servers as tool sources"), each reached over stdio (`command`) or Streamable HTTP (`url`).
//! A server's name becomes the prefix of its tools' names, so it is held to the characters a
//! tool name may use.

use std::{collections::BTreeMap, time::Duration};

use rojos_llm::Secret;
use rojos_mcp_client::config::{
    HttpServer, McpServerConfig, McpTransport, PerProject, StdioServer, PROJECT_ROOT,
};

use super::{
    keys::{invalid, seconds_key, ConfigError, EnvLookup},
    raw::RawMcpServer,
};

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
    let transport = match (&raw.command, &raw.url) {
        (Some(command), None) => McpTransport::Stdio(parse_stdio(&key, command, raw, env)?),
        (None, Some(url)) => McpTransport::Http(parse_http(&key, url, raw, env)?),
        (Some(_), Some(_)) => {
            return Err(invalid(
                &key,
                "set either command (a stdio server Rojos starts) or url (a Streamable HTTP \
                 server), not both",
            ))
        }
        (None, None) => {
            return Err(invalid(
                &key,
                "set command (a stdio server Rojos starts) or url (a Streamable HTTP server)",
            ))
        }
    };
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
        transport,
        start_timeout,
        per_project,
    })
}

fn parse_stdio(
    key: &str,
    command: &str,
    raw: &RawMcpServer,
    env: EnvLookup<'_>,
) -> Result<StdioServer, ConfigError> {
    if command.trim().is_empty() {
        return Err(invalid(format!("{key}.command"), "must not be empty"));
    }
    if !raw.headers.is_empty() || !raw.headers_from.is_empty() {
        return Err(invalid(
            key,
            "headers and headers_from apply only to a url server; a command server gets \
             its secrets through env and env_from",
        ));
    }
    let mut variables = plain_secrets(&raw.env);
    variables.extend(secrets_from(
        &format!("{key}.env_from"),
        &raw.env_from,
        env,
    )?);
    Ok(StdioServer {
        command: command.to_owned(),
        args: raw.args.clone(),
        env: variables,
    })
}

fn parse_http(
    key: &str,
    url: &str,
    raw: &RawMcpServer,
    env: EnvLookup<'_>,
) -> Result<HttpServer, ConfigError> {
    if !raw.args.is_empty() || !raw.env.is_empty() || !raw.env_from.is_empty() {
        return Err(invalid(
            key,
            "args, env and env_from apply only to a command server; a url server is not \
             started by Rojos (send its secrets with headers_from)",
        ));
    }
    if url.contains(PROJECT_ROOT) || raw.headers.values().any(|v| v.contains(PROJECT_ROOT)) {
        return Err(invalid(
            key,
            "{project_root} is not replaced in a url: a remote server cannot see this \
             host's project folders; use a command server for per-project instances",
        ));
    }
    let scheme_ok = url::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    });
    if !scheme_ok {
        return Err(invalid(
            format!("{key}.url"),
            format!("{url:?} is not an http:// or https:// URL with a host"),
        ));
    }
    let mut headers = plain_secrets(&raw.headers);
    headers.extend(secrets_from(
        &format!("{key}.headers_from"),
        &raw.headers_from,
        env,
    )?);
    for (header, value) in &headers {
        let valid = http::HeaderName::try_from(header.as_str()).is_ok()
            && http::HeaderValue::try_from(value.expose()).is_ok();
        if !valid {
            return Err(invalid(
                format!("{key}.headers.{header}"),
                "is not a valid HTTP header name, or its value has characters a header \
                 may not hold (e.g. a line break)",
            ));
        }
    }
    Ok(HttpServer {
        url: url.to_owned(),
        headers,
    })
}

/// `values` as secrets (so they never show in logs, though they were written in the file).
fn plain_secrets(values: &BTreeMap<String, String>) -> BTreeMap<String, Secret> {
    values
        .iter()
        .map(|(k, v)| (k.clone(), Secret::new(v.clone())))
        .collect()
}

/// `sources`' values read from the host's environment: name → variable's whole value.
fn secrets_from(
    key: &str,
    sources: &BTreeMap<String, String>,
    env: EnvLookup<'_>,
) -> Result<BTreeMap<String, Secret>, ConfigError> {
    sources
        .iter()
        .map(|(name, source)| match env(source) {
            Some(value) => Ok((name.clone(), Secret::new(value))),
            None => Err(invalid(
                format!("{key}.{name}"),
                format!("the environment variable {source} is not set"),
            )),
        })
        .collect()
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
}
