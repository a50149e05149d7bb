//! The abuse scenario (`--only abuse`): three attacks, each on a fresh host (so one attack's
//! leftover memory does not count against the next), with the host's peak RSS and `/healthz`
//! (probed every 10 ms) watched while it lasts:
//!
//! 1. a tool-call flood: one model turn asks for `upstream::FLOOD_CALLS` reads of a 1 MB
//!    file, every path spelt differently so a check for repeated calls lets them through,
//!    then answers; the stored conversation is then read back, still watched (its size, and
//!    its pages once the server pages it);
//! 2. a huge line: the upstream answers with one SSE `data:` line of
//!    `upstream::HUGE_LINE_BYTES`;
//! 3. partial heads: [`heads::CONNECTIONS`] connections each send part of a request head and
//!    then nothing (`heads`).
//!
//! Every wait is bounded, so a host that stops answering is reported rather than waited for.

mod heads;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context;
use serde::de::IgnoredAny;

pub(crate) use heads::{Heads, CONNECTIONS, HOLD, PARTIAL_HEAD};

use crate::{
    client::{self, Ending},
    host::{Flavour, HostProcess, TOKEN},
    upstream::{Misbehaviour, Upstream, FLOOD_FILE},
    watch::{Healthz, Probing, Watch},
};

/// The attacks, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attack {
    /// A turn of `upstream::FLOOD_CALLS` reads of a 1 MB file.
    ToolFlood,
    /// One SSE `data:` line of `upstream::HUGE_LINE_BYTES`.
    HugeLine,
    /// [`heads::CONNECTIONS`] connections holding a partial request head.
    PartialHeads,
}

impl Attack {
    /// Every attack, in order.
    pub(crate) const ALL: [Attack; 3] = [Attack::ToolFlood, Attack::HugeLine, Attack::PartialHeads];
}

/// Size of the file the flood reads (under the read limit of 1 MiB, so every read succeeds).
pub(crate) const FLOOD_FILE_BYTES: usize = 1_000_000;
/// How often `/healthz` is probed during an attack.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(10);
/// How long a fresh host is left alone before its idle RSS is read.
const SETTLE: Duration = Duration::from_millis(300);
/// The longest wait for a chat's response head, and then for its stream to end.
const CHAT_START_LIMIT: Duration = Duration::from_secs(30);
const CHAT_LIMIT: Duration = Duration::from_secs(180);
/// The longest wait for the stored conversation, all pages together.
const READ_BACK_LIMIT: Duration = Duration::from_secs(60);
/// The header that names the next page of `GET /conversations/{id}`, when there is one; the
/// next page is asked for with `?from=` and its value.
const NEXT_PAGE_HEADER: &str = "Rojos-Next-From";
/// Pages read back at most.
const MAX_PAGES: usize = 10_000;

/// What one attack measured.
#[derive(Debug)]
pub(crate) struct Phase {
    /// The fresh host's resident memory before the attack, in bytes.
    pub(crate) idle_rss: u64,
    /// Its peak resident memory during the attack, in bytes.
    pub(crate) peak_rss: u64,
    /// `/healthz` during the attack.
    pub(crate) healthz: Healthz,
    /// How long the attack took.
    pub(crate) elapsed: Duration,
    /// What the attack itself saw.
    pub(crate) finding: Finding,
    /// The end of the host's log, when the host died during the attack.
    pub(crate) host_died: Option<String>,
}

/// What an attack saw besides memory and `/healthz`.
#[derive(Debug)]
pub(crate) enum Finding {
    /// How the attacking chat ended, and (for the flood) the stored conversation.
    Chat {
        /// The stream, counted.
        ending: Ending,
        /// `GET /conversations/{id}` read back, when the chat named a conversation.
        stored: Option<Result<Stored, String>>,
    },
    /// What became of the partial-head connections.
    Heads(Heads),
}

/// A stored conversation as `GET /conversations/{id}` returned it.
#[derive(Debug, Default)]
pub(crate) struct Stored {
    /// Response body bytes, all pages together.
    pub(crate) bytes: u64,
    /// Messages, all pages together.
    pub(crate) messages: usize,
    /// Pages read (1 when the server does not page).
    pub(crate) pages: usize,
}

/// Runs `attack` on a fresh host.
pub(crate) async fn run(
    attack: Attack,
    build: &Path,
    upstream: &Upstream,
) -> anyhow::Result<Phase> {
    let provider = match attack {
        Attack::ToolFlood => upstream.misbehaving_url(Misbehaviour::ToolFlood),
        Attack::HugeLine => upstream.misbehaving_url(Misbehaviour::HugeLine),
        Attack::PartialHeads => upstream.base_url.clone(),
    };
    let mut host = HostProcess::start(build, &provider, Flavour::Abuse).await?;
    if attack == Attack::ToolFlood {
        write_flood_file(&host)?;
    }
    tokio::time::sleep(SETTLE).await;
    let idle_rss = host.memory()?.rss;
    let probing = Probing {
        every: PROBE_EVERY,
        fresh_connections: attack == Attack::PartialHeads,
    };
    let watch = Watch::start(&host, probing);
    let started = Instant::now();
    let finding = match attack {
        Attack::ToolFlood => flood(&host).await,
        Attack::HugeLine => huge_line(&host).await,
        Attack::PartialHeads => Finding::Heads(heads::hold(&host.url).await),
    };
    let elapsed = started.elapsed();
    let watched = watch.finish(&host).await;
    let host_died = (!host.alive()).then(|| host.log_tail());
    host.stop().await;
    Ok(Phase {
        idle_rss,
        peak_rss: watched.peak_rss,
        healthz: watched.healthz,
        elapsed,
        finding,
        host_died,
    })
}

const FLOOD_PROJECT: &str = "abuse-flood";
const LINE_PROJECT: &str = "abuse-line";

/// Puts the flood's file into its project before the first chat there.
fn write_flood_file(host: &HostProcess) -> anyhow::Result<()> {
    let root = host.project_root(FLOOD_PROJECT);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let line = format!(
        "{:<99}\n",
        "A line of the big file that the flood reads again and again."
    );
    let text = line.repeat(FLOOD_FILE_BYTES / line.len());
    std::fs::write(root.join(FLOOD_FILE), text).context("cannot write the flood's file")
}

async fn flood(host: &HostProcess) -> Finding {
    let http = reqwest::Client::new();
    let message = format!("Read {FLOOD_FILE} many times, then tell me what it says.");
    let ending = chat(&http, &host.url, FLOOD_PROJECT, &message).await;
    let stored = match &ending.conversation {
        Some(id) => Some(read_back(&http, &host.url, id).await),
        None => None,
    };
    Finding::Chat { ending, stored }
}

async fn huge_line(host: &HostProcess) -> Finding {
    let http = reqwest::Client::new();
    let ending = chat(&http, &host.url, LINE_PROJECT, "Tell me a long story.").await;
    Finding::Chat {
        ending,
        stored: None,
    }
}

/// One chat, followed to its end within the limits.
async fn chat(http: &reqwest::Client, url: &str, project: &str, message: &str) -> Ending {
    let started = tokio::time::timeout(
        CHAT_START_LIMIT,
        client::start_chat(http, url, TOKEN, project, message),
    )
    .await;
    let problem = match started {
        Ok(Ok(response)) => return client::follow_chat(response, CHAT_LIMIT).await,
        Ok(Err(e)) => e,
        Err(_) => format!("no response within {} s", CHAT_START_LIMIT.as_secs()),
    };
    Ending {
        problem: Some(problem),
        ..Ending::default()
    }
}

/// Reads conversation `id` back, following [`NEXT_PAGE_HEADER`] while the server sends it.
async fn read_back(http: &reqwest::Client, url: &str, id: &str) -> Result<Stored, String> {
    let pages = async {
        let mut stored = Stored::default();
        let mut from: Option<String> = None;
        loop {
            let next = read_page(
                http,
                &format!("{url}/conversations/{id}"),
                from.as_deref(),
                &mut stored,
            )
            .await?;
            match next {
                None => return Ok(stored),
                Some(_) if stored.pages >= MAX_PAGES => {
                    return Err(format!("still more after {MAX_PAGES} pages"))
                }
                Some(next) => from = Some(next),
            }
        }
    };
    tokio::time::timeout(READ_BACK_LIMIT, pages)
        .await
        .unwrap_or_else(|_| Err(format!("not read within {} s", READ_BACK_LIMIT.as_secs())))
}

/// Reads one page into `stored`; returns the next page's `from`, if any.
async fn read_page(
    http: &reqwest::Client,
    url: &str,
    from: Option<&str>,
    stored: &mut Stored,
) -> Result<Option<String>, String> {
    let mut request = http.get(url).bearer_auth(TOKEN);
    if let Some(from) = from {
        request = request.query(&[("from", from)]);
    }
    let page = stored.pages + 1;
    let response = request
        .send()
        .await
        .map_err(|e| format!("page {page}: {e}"))?;
    if response.status() != 200 {
        return Err(format!("page {page}: status {}", response.status()));
    }
    let next = response
        .headers()
        .get(NEXT_PAGE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("page {page}: {e}"))?;
    let messages: Vec<IgnoredAny> = serde_json::from_slice(&body)
        .map_err(|e| format!("page {page} is not a JSON array: {e}"))?;
    stored.bytes += body.len() as u64;
    stored.messages += messages.len();
    stored.pages = page;
    Ok(next)
}
