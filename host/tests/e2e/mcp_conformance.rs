//! The MCP server (`/mcp/{projectId}?rojo=NAME`) against the official conformance suite
//! (`@modelcontextprotocol/conformance`, server mode, pinned in `mcp/npm`): every scenario
//! that applies to a tools-only server passes. `docs/mcp.md` lists the scenarios not run and
//! why. The suite cannot send headers, so it talks to a loopback proxy that adds the bearer
//! token ([`BearerProxy`]); the real route keeps its authentication.
//!
//! Without the npm packages this test fails with the command that installs them.

use std::{path::PathBuf, time::Duration};

use crate::support::{
    bearer_proxy::BearerProxy,
    binary::RunningBinary,
    host::{HostConfig, DEMO_TOKEN},
};

/// The tests' npm folder, installed by `.ci/run`.
const NPM_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp/npm");

/// What `.ci/run` runs to install the suite.
const INSTALL: &str = "cd host/tests/e2e/mcp/npm && npm ci";

/// The scenarios that apply to a server offering only its own tools: the handshake, ping,
/// the tool list, and concurrent requests on the Streamable HTTP transport. The suite's
/// `tools-call-*` scenarios call tools of its own (`test_simple_text`, …) that a Rojos rojo
/// does not have (`docs/mcp.md`, "Conformance").
const TOOLS_ONLY_SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
];

/// One scenario's run: whether it passed, and everything the suite printed.
struct ScenarioRun {
    passed: bool,
    output: String,
}

/// Runs `scenario` against `url` with the suite's pinned Node.js (it needs Node 22).
async fn run_scenario(url: &str, scenario: &str) -> ScenarioRun {
    let npm = PathBuf::from(NPM_DIR).join("node_modules");
    let node = npm.join(".bin/node");
    let suite = npm.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "the MCP conformance suite is missing; install it with: {INSTALL}"
    );
    let run = tokio::process::Command::new(node)
        .arg(suite)
        .args(["server", "--url", url, "--scenario", scenario])
        .current_dir(NPM_DIR)
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(120), run).await {
        Err(_) => panic!("conformance scenario {scenario} did not finish within 120 s"),
        Ok(Err(e)) => panic!("the conformance suite cannot be run ({e}): {INSTALL}"),
        Ok(Ok(output)) => output,
    };
    ScenarioRun {
        passed: output.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

#[tokio::test]
async fn mcp_the_official_conformance_suite_passes_every_tools_only_scenario() {
    let dir = HostConfig::builtins().in_temp_folder();
    let binary = RunningBinary::start(dir.path(), "info", &[]);
    let target = format!("{}/mcp/demo?rojo=default", binary.url());
    let proxy = BearerProxy::start(&target, DEMO_TOKEN).await;

    let mut failed = Vec::new();
    for scenario in TOOLS_ONLY_SCENARIOS {
        let run = run_scenario(&proxy.url, scenario).await;
        // Shown with `--nocapture`: what each scenario checked.
        eprintln!("--- {scenario}\n{}", run.output);
        if !run.passed {
            failed.push(format!("--- {scenario}\n{}", run.output));
        }
    }
    assert!(
        failed.is_empty(),
        "conformance scenarios failed:\n{}",
        failed.join("\n")
    );
}
