//! One tool call through each path a tool can take, side by side: `read_path_meta` on the
//! same 5-byte file as a plugin (`rojos::plugins::invoke`, what the host does per plugin
//! call), as the tool of an MCP stdio server (`McpTool::invoke` on `rojos mcp --project P
//! --rojo R`: Rojos itself serving that plugin over stdio, a child process) and as the tool
//! of an MCP server over Streamable HTTP (`McpTool::invoke` on a release host's
//! `/mcp/P?rojo=R`, loopback). The MCP paths are the host's own client (`McpClients`), so
//! each call includes the schema check, the JSON-RPC round trip and the far side's `invoke`.
//! Each is timed as the median per-call time over batches, one call at a time.

use std::{
    collections::BTreeMap,
    future::Future,
    hint::black_box,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use cap_std::{ambient_authority, fs::Dir};
use rojos::{
    config::{HttpServer, McpServerConfig, McpTransport, StdioServer},
    mcp::client::{McpClients, McpTool},
    plugins::{invoke, CallRequest, Loader, ToolArgs},
    secret::Secret,
};
use rojos_plugin_api::Limits;

use crate::host::{Flavour, HostProcess, TOKEN};

/// Median time per call of each path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct McpPaths {
    /// The plugin, through the host's `invoke`.
    pub(crate) plugin: Duration,
    /// The MCP stdio server `rojos mcp`.
    pub(crate) stdio: Duration,
    /// The MCP server over Streamable HTTP, a host's `/mcp`.
    pub(crate) http: Duration,
}

const BATCHES: usize = 31;
const BATCH: usize = 50;

/// The project both MCP servers serve, and the file read.
const PROJECT: &str = "bench";

/// The median over [`BATCHES`] of the mean time of [`BATCH`] awaited calls of `call`.
async fn per_call<F: Future>(mut call: impl FnMut() -> F) -> Duration {
    for _ in 0..BATCH {
        black_box(call().await);
    }
    let mut means = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let started = Instant::now();
        for _ in 0..BATCH {
            black_box(call().await);
        }
        means.push(started.elapsed() / BATCH as u32);
    }
    means.sort();
    means[BATCHES / 2]
}

/// Starts a release host (for `/mcp` and its config, which `rojos mcp` reads too), connects
/// to both MCP servers and times the three paths.
pub(crate) async fn measure(build: &Path, provider_url: &str) -> anyhow::Result<McpPaths> {
    let host = HostProcess::start(build, provider_url, Flavour::Plain).await?;
    let root = host.project_root(PROJECT);
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("hello.txt"), "hello")?;
    let clients =
        McpClients::start(&servers(build, &host)).context("cannot start the MCP client")?;
    for report in &clients.reports {
        anyhow::ensure!(report.outcome.is_ok(), "{report}");
    }
    let tool = |name: &str| -> anyhow::Result<Arc<McpTool>> {
        clients
            .listed_tools()
            .into_iter()
            .flat_map(|(_, tools)| tools)
            .find(|t| t.name == name)
            .with_context(|| format!("no MCP tool {name}"))
    };
    let (stdio, http) = (
        tool("stdio__read_path_meta")?,
        tool("http__read_path_meta")?,
    );

    let loader = Loader::new(8)?;
    let plugin = loader
        .load(&build.join("librojos_tool_read_path_meta.so"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let request = CallRequest {
        project_id: PROJECT.to_owned(),
        root: Arc::new(Dir::open_ambient_dir(&root, ambient_authority())?),
        root_path: root.clone(),
        limits: Limits::default(),
        timeout: Duration::from_secs(10),
        create_only: Vec::new(),
        stop: Default::default(),
    };
    let args = ToolArgs::try_from(serde_json::json!({"path": "hello.txt"}))
        .map_err(|v| anyhow::anyhow!("arguments {v} are not an object"))?;
    let (args, request) = (&args, &request);

    let expected = invoke(&plugin, args, request)
        .await
        .map_err(|e| anyhow::anyhow!("the plugin failed: {}", e.message))?;
    for tool in [&stdio, &http] {
        let answer = tool.invoke(args, request).await;
        anyhow::ensure!(
            answer.as_deref() == Ok(expected.as_str()),
            "{} answered {answer:?}, the plugin {expected:?}",
            tool.name
        );
    }
    let plugin = per_call(|| invoke(&plugin, args, request)).await;
    let stdio = per_call(|| stdio.invoke(args, request)).await;
    let http = per_call(|| http.invoke(args, request)).await;
    drop(clients);
    host.stop().await;
    Ok(McpPaths {
        plugin,
        stdio,
        http,
    })
}

/// `stdio`: `rojos mcp` on the host's config; `http`: the host's `/mcp`; both on rojo
/// `default` (every tool) and project [`PROJECT`].
fn servers(build: &Path, host: &HostProcess) -> Vec<McpServerConfig> {
    let config = host.dir().join("rojos.toml");
    let stdio = StdioServer {
        command: build.join("rojos").display().to_string(),
        args: [
            "--config",
            &config.display().to_string(),
            "mcp",
            "--project",
            PROJECT,
            "--rojo",
            "default",
        ]
        .map(str::to_owned)
        .to_vec(),
        env: BTreeMap::new(),
    };
    let http = HttpServer {
        url: format!("{}/mcp/{PROJECT}?rojo=default", host.url),
        headers: BTreeMap::from([(
            "Authorization".to_owned(),
            Secret::new(format!("Bearer {TOKEN}")),
        )]),
    };
    [
        ("stdio", McpTransport::Stdio(stdio)),
        ("http", McpTransport::Http(http)),
    ]
    .map(|(name, transport)| McpServerConfig {
        name: name.to_owned(),
        transport,
        start_timeout: Duration::from_secs(30),
        per_project: None,
    })
    .to_vec()
}
