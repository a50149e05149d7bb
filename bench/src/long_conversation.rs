//! S4: one long conversation on a fresh host, [`TURNS`] user messages one after another, the
//! upstream (`upstream::long`) answering each with a read of a 2 KB file and then 2 KB of
//! text, so the history grows by about 4 KB a turn, to about 800 KB. The host is told the
//! model's window is `upstream::LONG_WINDOW_TOKENS` (`Flavour::Long`), passed after about ten
//! turns: from then on older results are shortened and older turns summarised, so what each
//! turn sends, and the host's work for it, should stay flat however long the conversation
//! gets. Per turn it records the host's CPU (the schedstat sum of its threads, nanosecond
//! resolution, read before the request and after the stream's end), the latency, the bytes
//! the host sent upstream (the upstream counts them) and of those the bytes of requests for
//! a summary, and whether the turn compacted. One client, nothing else running on the host.
//! With `tokenizer`, the model is one of OpenAI's and the host counts every request with
//! `o200k_base`: the difference in CPU per turn is the tokenizer's cost.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use crate::{
    client,
    host::{Flavour, HostProcess, Launch, TOKEN},
    store::StoreSetup,
    threads,
    upstream::{self, Upstream},
};

/// User messages in the conversation.
pub(crate) const TURNS: usize = 200;
/// The project S4 runs in.
const PROJECT: &str = "s4-long";
/// The longest wait for one turn.
const TURN_LIMIT: Duration = Duration::from_secs(60);

/// One user message and the model's answer to it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turn {
    /// Request body bytes the host sent upstream in this turn (two requests, each with the
    /// whole history).
    pub(crate) bytes_sent: u64,
    /// The host's CPU time for the turn.
    pub(crate) cpu: Duration,
    /// From sending the message to the end of the stream.
    pub(crate) latency: Duration,
    /// From sending the message to the first event.
    pub(crate) first_event: Duration,
    /// Of `bytes_sent`, the bytes of requests for a summary.
    pub(crate) summary_bytes: u64,
    /// `CONTEXT_COMPACTED` events in the turn's stream.
    pub(crate) compactions: u64,
}

/// What S4 measured.
#[derive(Debug)]
pub(crate) struct LongRun {
    /// The turns, in order (fewer than asked when one failed).
    pub(crate) turns: Vec<Turn>,
    /// Why the conversation stopped early, if it did.
    pub(crate) failure: Option<String>,
    /// Whether the per-turn CPU comes from `schedstat` (else from clock ticks).
    pub(crate) precise_cpu: bool,
    /// Whether the host counted requests with a tokenizer.
    pub(crate) tokenizer: bool,
    /// Requests the upstream received over the window.
    pub(crate) over_window: u64,
    /// The host's memory at the end (its peak, and what is private now), when read.
    pub(crate) memory: Option<crate::host::Memory>,
}

/// Runs S4 with `turns` user messages on a fresh host of `launch`.
pub(crate) async fn run(
    launch: &Launch,
    upstream: &Upstream,
    store: &StoreSetup,
    turns: usize,
    tokenizer: bool,
) -> anyhow::Result<LongRun> {
    let flavour = Flavour::Long { tokenizer };
    let host = HostProcess::launch(launch, &upstream.long_url(), flavour, store).await?;
    let over_window = upstream.long_over_window();
    let root = host.project_root(PROJECT);
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join(upstream::LONG_FILE), upstream::long_file())?;
    let http = reqwest::Client::new();
    let precise_cpu = threads::on_cpu(host.pid()).is_some();
    let mut run = LongRun {
        turns: Vec::with_capacity(turns),
        failure: None,
        precise_cpu,
        tokenizer,
        over_window: 0,
        memory: None,
    };
    let mut conversation = None;
    for i in 0..turns {
        match turn(&http, &host, upstream, i, conversation.as_deref()).await {
            Ok((measured, id)) => {
                run.turns.push(measured);
                conversation = Some(id);
            }
            Err(e) => {
                run.failure = Some(format!("turn {}: {e:#}", i + 1));
                break;
            }
        }
    }
    run.memory = host.memory().ok();
    host.stop().await;
    run.over_window = upstream.long_over_window() - over_window;
    Ok(run)
}

/// The host's CPU time now: schedstat where there is one, else clock ticks.
fn host_cpu(host: &HostProcess) -> Duration {
    threads::on_cpu(host.pid())
        .or_else(|| host.cpu().ok())
        .unwrap_or_default()
}

/// One user message, measured; the conversation's id.
async fn turn(
    http: &reqwest::Client,
    host: &HostProcess,
    upstream: &Upstream,
    index: usize,
    conversation: Option<&str>,
) -> anyhow::Result<(Turn, String)> {
    let mut body = json!({
        "projectId": PROJECT,
        "message": format!("Turn {}: read the notes again and say what they say.", index + 1),
    });
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let (bytes0, cpu0) = (upstream.long_bytes(), host_cpu(host));
    let summary0 = upstream.long_summary_bytes();
    let started = Instant::now();
    let (stream, first_event) = tokio::time::timeout(TURN_LIMIT, read(http, host, &body))
        .await
        .context("no end within a minute")??;
    let latency = started.elapsed();
    let cpu = host_cpu(host).saturating_sub(cpu0);
    let bytes_sent = upstream.long_bytes() - bytes0;
    let summary_bytes = upstream.long_summary_bytes() - summary0;
    let ending = client::count_events(&stream).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        ending.stop_reason.as_deref() == Some("completed") && ending.results == (1, 0),
        "expected one ok tool result and DONE completed, got {:?} ({:?})",
        ending.stop_reason,
        ending.errors
    );
    let id = ending
        .conversation
        .context("DONE without a conversation id")?;
    Ok((
        Turn {
            bytes_sent,
            cpu,
            latency,
            first_event,
            summary_bytes,
            compactions: ending.compactions,
        },
        id,
    ))
}

/// Sends one chat request and reads its stream; the body and the time to its first event.
async fn read(
    http: &reqwest::Client,
    host: &HostProcess,
    body: &serde_json::Value,
) -> anyhow::Result<(Vec<u8>, Duration)> {
    let started = Instant::now();
    let mut response = http
        .post(format!("{}/chat", host.url))
        .bearer_auth(TOKEN)
        .json(body)
        .send()
        .await?;
    anyhow::ensure!(
        response.status() == 200,
        "status {}: {}",
        response.status(),
        response.text().await.unwrap_or_default()
    );
    let mut stream = Vec::new();
    let mut first_event = None;
    while let Some(chunk) = response.chunk().await? {
        stream.extend_from_slice(&chunk);
        if first_event.is_none() && stream.contains(&b'\n') {
            first_event = Some(started.elapsed());
        }
    }
    Ok((stream, first_event.unwrap_or_else(|| started.elapsed())))
}
