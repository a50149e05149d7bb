//! The time from a plugin file's arrival in the drop-in folder (`[plugins].dir`) to its tool
//! being callable: a host with a drop-in folder, a plugin copied in under a dot-name then
//! renamed into place (the documented way to deploy), and `GET /tools` polled every 2 ms until
//! the tool is offered. Repeated a few times, removing the file in between.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::host::{Flavour, HostProcess, TOKEN};

/// The plugin deployed: a test plugin whose tool name no built-in uses.
const PLUGIN: &str = "librojos_test_panic_tool.so";
const TOOL: &str = "panic_tool";
const ROUNDS: usize = 3;

/// Arrival-to-callable times, one per round.
pub(crate) async fn measure(build: &Path, provider_url: &str) -> anyhow::Result<Vec<Duration>> {
    let source = build.join(PLUGIN);
    if !source.exists() {
        bail!(
            "{} is missing: run `cargo build --release --workspace` first",
            source.display()
        );
    }
    let host = HostProcess::start(build, provider_url, Flavour::DropIn).await?;
    let folder = host.dir().join("plugins.d");
    let http = reqwest::Client::new();
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let staged = folder.join(format!(".{TOOL}-{round}.so.part"));
        let deployed = folder.join(format!("lib{TOOL}.so"));
        std::fs::copy(&source, &staged).context("cannot copy the plugin")?;
        let arrived = Instant::now();
        std::fs::rename(&staged, &deployed)?;
        wait_until(&http, &host.url, true)
            .await
            .with_context(|| host.log_tail())?;
        times.push(arrived.elapsed());
        std::fs::remove_file(&deployed)?;
        wait_until(&http, &host.url, false)
            .await
            .with_context(|| host.log_tail())?;
    }
    host.stop().await;
    Ok(times)
}

/// Polls `GET /tools` until the tool is offered (`present`) or no longer offered.
async fn wait_until(http: &reqwest::Client, url: &str, present: bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let tools: Value = http
            .get(format!("{url}/tools?rojo=default"))
            .bearer_auth(TOKEN)
            .send()
            .await?
            .json()
            .await?;
        let offered = tools
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == TOOL));
        if offered == present {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    bail!(
        "the tool {TOOL} was still {} after 20 s",
        if present { "missing" } else { "offered" }
    )
}
