//! Idle memory (`--only idle`): the host's resident memory with no plugin, with each built-in
//! plugin loaded alone, and with all seven, each on fresh hosts. Read twice per host: 300 ms
//! after it starts listening, and again 300 ms after a first use, one chat whose model turn
//! calls every loaded tool once (`upstream::first_use`), so what is set up lazily on the first
//! request (the store's connection, the provider client, a plugin's first call, worker
//! threads' arenas) is counted. The figure quoted is the one after first use: a host in a
//! fleet has served a request. What a plugin costs is its configuration's figure less the one
//! without plugins. Configurations are interleaved round by round; each figure is the median
//! over the rounds. Beside the RSS, its private part (`RssAnon`): the RSS also counts the
//! pages of the binary and the plugins' files mapped so far, which depends on what the page
//! cache holds (the same binary measured 2 MiB apart from two copies).

use std::time::Duration;

use anyhow::Context;

use crate::{
    client,
    host::{Flavour, HostProcess, Launch, Memory, ALL_BUILTINS, TOKEN},
    stats,
    store::StoreSetup,
    upstream::Upstream,
};

/// How long a host is left alone before its memory is read.
const SETTLE: Duration = Duration::from_millis(300);
/// The longest wait for the first-use chat.
const CHAT_LIMIT: Duration = Duration::from_secs(30);

/// One configuration's idle memory, medians over the rounds, in bytes.
#[derive(Debug, Clone)]
pub(crate) struct IdleRss {
    /// `no plugins`, a plugin's name, or `all seven`.
    pub(crate) label: String,
    /// RSS after start.
    pub(crate) after_start: u64,
    /// RSS after the first-use chat.
    pub(crate) after_first_use: u64,
    /// Of it private (`RssAnon`), after start.
    pub(crate) anon_after_start: u64,
    /// Of it private (`RssAnon`), after the first-use chat.
    pub(crate) anon_after_first_use: u64,
    /// Why a round failed, if one did.
    pub(crate) problem: Option<String>,
}

/// The configurations measured: none, each built-in alone, all together.
fn configurations() -> Vec<(String, Vec<&'static str>)> {
    let alone = ALL_BUILTINS.iter().map(|name| {
        let short = name.trim_start_matches("rojos_tool_").to_owned();
        (short, vec![*name])
    });
    std::iter::once(("no plugins".to_owned(), Vec::new()))
        .chain(alone)
        .chain(std::iter::once((
            "all seven".to_owned(),
            ALL_BUILTINS.to_vec(),
        )))
        .collect()
}

/// Measures every configuration `rounds` times with `launch`'s binary and plugin folder.
pub(crate) async fn measure(launch: &Launch, upstream: &Upstream, rounds: usize) -> Vec<IdleRss> {
    let configurations = configurations();
    let mut readings: Vec<Vec<Reading>> = vec![Vec::new(); configurations.len()];
    let mut problems: Vec<Option<String>> = vec![None; configurations.len()];
    for _ in 0..rounds.max(1) {
        for (i, (_, load)) in configurations.iter().enumerate() {
            match one_host(&launch.loading(load), upstream).await {
                Ok(reading) => readings[i].push(reading),
                Err(e) => problems[i] = Some(format!("{e:#}")),
            }
        }
    }
    configurations
        .into_iter()
        .zip(readings)
        .zip(problems)
        .map(|(((label, _), readings), problem)| {
            let median_of = |pick: fn(&Reading) -> u64| {
                let values: Vec<f64> = readings.iter().map(|r| pick(r) as f64).collect();
                stats::median(&values).unwrap_or(0.0) as u64
            };
            IdleRss {
                label,
                after_start: median_of(|r| r.after_start.rss),
                after_first_use: median_of(|r| r.after_first_use.rss),
                anon_after_start: median_of(|r| r.after_start.anon),
                anon_after_first_use: median_of(|r| r.after_first_use.anon),
                problem,
            }
        })
        .collect()
}

/// One fresh host's memory.
#[derive(Debug, Clone, Copy)]
struct Reading {
    after_start: Memory,
    after_first_use: Memory,
}

/// A fresh host of `launch`: its memory after start and after the first-use chat.
async fn one_host(launch: &Launch, upstream: &Upstream) -> anyhow::Result<Reading> {
    let host = HostProcess::launch(
        launch,
        &upstream.first_use_url(),
        Flavour::Plain,
        &StoreSetup::default(),
    )
    .await?;
    tokio::time::sleep(SETTLE).await;
    let after_start = host.memory()?;
    let used = first_use(&host).await;
    tokio::time::sleep(SETTLE).await;
    let after_first_use = host.memory()?;
    host.stop().await;
    used?;
    Ok(Reading {
        after_start,
        after_first_use,
    })
}

/// One chat calling every loaded tool once, read to its `DONE`.
async fn first_use(host: &HostProcess) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let response = client::start_chat(&http, &host.url, TOKEN, "idle", "Use every tool once.")
        .await
        .map_err(anyhow::Error::msg)
        .context("the first-use chat")?;
    let ending = client::follow_chat(response, CHAT_LIMIT).await;
    anyhow::ensure!(
        ending.stop_reason.as_deref() == Some("completed"),
        "the first-use chat ended {:?} ({:?})",
        ending.stop_reason,
        ending.problem
    );
    Ok(())
}
