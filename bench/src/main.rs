//! `rojos-bench`: the host's throughput, latency and memory under load, and the cost of the
//! plugin boundary. Run it with `cargo build --release --workspace && cargo run --release -p
//! rojos-bench` (see bench/README.md).
//!
//! It starts the release `rojos` binary as a separate process with the real plugins and a
//! scripted OpenAI-compatible upstream on loopback (in this process), drives concurrent
//! clients through the docs/intro conversation (3 model turns, 2 tool calls), checks every
//! stream and a sample of the files written, and prints Rojos's own figures (conversations/s,
//! latency percentiles, time to first event, the longest pause in each stream, errors, the
//! host's CPU per conversation user and system apart, its runtime's busy time, parks and
//! queued tasks from its own `/metrics` (`runtime`), idle and peak RSS) for S1–S3; S4, one
//! long conversation past the model's window, whose bytes sent and CPU per turn should stay
//! flat once the window is reached (`long_conversation`); the idle memory with each built-in plugin (`idle`); then
//! the abuse scenario (a tool-call flood, a huge SSE line, partial request heads: `abuse`), the
//! plugin boundary cost, one tool call through each path (plugin, MCP stdio, MCP over HTTP:
//! `mcp_paths`, `--only mcp`, `--no-mcp`), a plugin in a sandboxed worker against in-process
//! (warm call, cold start, idle RSS: `workers`, `--only workers`) and the drop-in deploy time.
//! `--store postgres` runs S1–S3 on a throwaway PostgreSQL cluster instead of SQLite, and
//! `--store both` on each, compared side by side (`store`).
//! `--share-runs on|off` (and `--baseline-share-runs`) sets the PostgreSQL host's
//! `[store] share_runs`, so publishing runs for other hosts is measured against none.
//! `--baseline OLD/rojos` runs the selected scenarios against that binary and this build
//! interleaved and prints each figure's median per binary and the after/before ratio
//! (`compare`); `--thread-states` samples where the host's threads wait (`threads`).
//! `--answer-chunks N` streams S1–S3's final answer as N token-sized chunks, the shape of a
//! provider's real answer, where the host's work per streamed chunk dominates.
//! It names the file system under the hosts' folders first, and warns where it skews the
//! figures (`scratch`).
//! Figures, never pass/fail: the goals are printed beside them. No other system's figures:
//! cross-system ratios come from the side-by-side harness only.

#![forbid(unsafe_code)]

mod abuse;
mod boundary;
mod client;
mod compare;
mod dropin;
mod figures;
mod host;
mod idle;
mod load;
mod long_conversation;
mod mcp_paths;
mod procfs;
mod report;
mod round_trip;
mod runtime;
mod scratch;
mod stats;
mod store;
mod store_run;
mod threads;
mod upstream;
mod watch;
mod workers;

use std::{path::PathBuf, time::Duration};

use clap::Parser;

use crate::{
    figures::Figure,
    host::{Flavour, HostProcess, Launch},
    load::Scenario,
    store::{Backend, Store, StoreChoice},
    store_run::StoreRun,
    upstream::{Pace, Upstream},
};

/// Command-line options; the defaults are the published run (about two minutes).
#[derive(Debug, Parser)]
#[command(
    name = "rojos-bench",
    about = "Load and plugin-boundary benchmark of the rojos host"
)]
struct Options {
    /// Seconds clients keep starting conversations in S1 (one client, no upstream delay).
    #[arg(long, default_value_t = 5.0)]
    s1_secs: f64,
    /// Seconds for S2 (32 clients, no upstream delay).
    #[arg(long, default_value_t = 10.0)]
    s2_secs: f64,
    /// Seconds for S3 (many clients, upstream 200 ms to first token, 20 ms between chunks).
    #[arg(long, default_value_t = 15.0)]
    s3_secs: f64,
    /// Concurrent clients in S3.
    #[arg(long, default_value_t = 1000)]
    s3_clients: usize,
    /// Stream S1–S3's final answer as this many token-sized content deltas (4 characters each)
    /// instead of the reference conversation's 6 deltas of 12: the shape of a provider's real answer, where the
    /// host's work per streamed chunk dominates. Each chunk is paced like the others in S3.
    #[arg(long)]
    answer_chunks: Option<usize>,
    /// User messages in S4's one long conversation.
    #[arg(long, default_value_t = long_conversation::TURNS)]
    s4_turns: usize,
    /// Name S4's model `gpt-4o`, so the host counts every request with OpenAI's tokenizer
    /// (`o200k_base`) instead of estimating it: run S4 with and without to see its cost.
    #[arg(long)]
    s4_tokenizer: bool,
    /// Rounds of the idle memory measurement (a fresh host per configuration per round).
    #[arg(long, default_value_t = 3)]
    idle_rounds: usize,
    /// Only run these scenarios (`S1`, `S2`, `S3`, `S4`, `idle`, `abuse`, `mcp`, `workers`; e.g.
    /// `--only S2`); repeat for more.
    #[arg(long)]
    only: Vec<String>,
    /// Skip the plugin boundary measurement.
    #[arg(long)]
    no_boundary: bool,
    /// Skip the tool call through each path (plugin, MCP stdio, MCP over HTTP).
    #[arg(long)]
    no_mcp: bool,
    /// Skip the drop-in folder measurement.
    #[arg(long)]
    no_dropin: bool,
    /// The host's conversation store for S1–S3: the embedded SQLite file, a throwaway
    /// PostgreSQL cluster (Debian's `postgresql` package), or each in turn, side by side.
    #[arg(long, value_enum, default_value_t = StoreChoice::Sqlite)]
    store: StoreChoice,
    /// Sample where the host's threads are (state, system call, wchan) during S1–S3.
    #[arg(long)]
    thread_states: bool,
    /// The host binary under test (default: `rojos` of this build); its plugins are the ones
    /// beside it when all seven are there, else this build's.
    #[arg(long)]
    host: Option<PathBuf>,
    /// A host binary to compare with (before), run interleaved with the one under test
    /// (after) on the selected S1–S4 and idle; its plugins as for `--host`. Prints each
    /// figure's median per binary and the after/before ratio, and nothing else.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// `[plugins].isolation` of the host under test (`in-process` or `worker`; default: the
    /// host's own default): S1–S3 with the built-ins in sandboxed workers. `worker-exec`:
    /// in workers each started by `exec` (`worker_start = "exec"`) instead of the zygote.
    #[arg(long, value_parser = ["in-process", "worker", "worker-exec"])]
    isolation: Option<String>,
    /// `[plugins].isolation` of the `--baseline` host. With `--baseline` naming the same
    /// binary as the one under test, `--baseline-isolation in-process --isolation worker`
    /// compares the two placements of the built-ins, interleaved.
    #[arg(long, value_parser = ["in-process", "worker", "worker-exec"])]
    baseline_isolation: Option<String>,
    /// `[store] share_runs` of the host under test on `--store postgres` (`on`, the host's
    /// default: every run's events published for other hosts to follow; `off`: none).
    #[arg(long, value_parser = ["on", "off"])]
    share_runs: Option<String>,
    /// `[store] share_runs` of the `--baseline` host. With `--baseline` naming the same binary,
    /// `--baseline-share-runs off --share-runs on` measures what publishing runs costs.
    #[arg(long, value_parser = ["on", "off"])]
    baseline_share_runs: Option<String>,
    /// With `--baseline`: rounds of (before, after).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

fn main() -> std::process::ExitCode {
    let options = Options::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("rojos-bench: cannot start a runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rojos-bench: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run(options: Options) -> anyhow::Result<()> {
    if let Err(e) = rojos::raise_open_files_limit() {
        eprintln!("rojos-bench: cannot raise the open files limit: {e}");
    }
    let build = host::build_dir()?;
    let mut launch = match &options.host {
        Some(binary) => Launch::of_binary(binary, &build)?,
        None => Launch::of_build(&build),
    };
    launch.isolation = isolation(options.isolation.as_deref());
    launch.share_runs = options.share_runs.as_deref().map(|v| v == "on");
    anyhow::ensure!(
        (options.share_runs.is_none() && options.baseline_share_runs.is_none())
            || options.store.backends()[0] == Backend::Postgres,
        "--share-runs and --baseline-share-runs need --store postgres"
    );
    report::machine(&launch.binary);

    if let Some(chunks) = options.answer_chunks {
        anyhow::ensure!(chunks > 0, "--answer-chunks takes 1 or more");
        upstream::choose_answer(upstream::Answer::in_tokens(chunks));
    }
    let upstream = Upstream::start().await?;
    if let Some(baseline) = &options.baseline {
        let mut before = Launch::of_binary(baseline, &build)?;
        before.isolation = isolation(options.baseline_isolation.as_deref());
        before.share_runs = options.baseline_share_runs.as_deref().map(|v| v == "on");
        return compare(&options, &before, &launch, &upstream).await;
    }
    // Every store first, so a missing PostgreSQL package stops the bench before any run.
    let mut stores = Vec::new();
    for &backend in options.store.backends() {
        stores.push(Store::start(backend).await?);
    }
    let mut runs = Vec::new();
    for store in &stores {
        runs.push(scenarios_on(&options, &launch, &upstream, store).await?);
    }
    drop(stores);
    let (requests, refused) = upstream.counts();
    println!("\nupstream: {requests} requests served, {refused} refused as malformed");
    if options.selects("idle") {
        println!();
        let rows = idle::measure(&launch, &upstream, options.idle_rounds).await;
        report::idle(&rows, options.idle_rounds);
    }
    if options.selects("abuse") {
        abuse(&build, &upstream).await;
    }

    let boundary = if options.no_boundary {
        None
    } else {
        println!();
        let boundary = tokio::task::spawn_blocking({
            let build = build.clone();
            move || boundary::measure(&build)
        })
        .await??;
        report::boundary(&boundary);
        Some(boundary)
    };
    if options.selects("workers") {
        println!();
        let figures = tokio::task::spawn_blocking({
            let build = build.clone();
            move || workers::measure(&build)
        })
        .await??;
        report::workers(&figures);
    }
    if options.selects("mcp") && !options.no_mcp {
        println!();
        let paths = mcp_paths::measure(&build, &upstream.base_url).await?;
        report::mcp_paths(&paths);
    }
    let dropin = if options.no_dropin {
        None
    } else {
        println!();
        let times = dropin::measure(&build, &upstream.base_url).await?;
        report::dropin(&times);
        Some(times)
    };
    println!();
    report::summary(&runs, boundary.as_ref(), dropin.as_deref());
    if let [sqlite, postgres] = runs.as_slice() {
        println!();
        report::stores(sqlite, postgres);
    }
    Ok(())
}

/// The binary, and where its plugins run when the bench chose it.
fn label(launch: &Launch) -> String {
    let mut label = launch.binary.display().to_string();
    if let Some(isolation) = launch.isolation {
        label += &format!(" (isolation = {isolation})");
    }
    if let Some(share) = launch.share_runs {
        label += &format!(" (share_runs = {share})");
    }
    label
}

/// The `[plugins].isolation` value of an `--isolation` option.
fn isolation(option: Option<&str>) -> Option<&'static str> {
    match option? {
        "worker" => Some("worker"),
        "worker-exec" => Some("worker-exec"),
        _ => Some("in-process"),
    }
}

/// Before/after: the selected S1–S4 and idle with `before` and `after`, interleaved round by
/// round, on the first `--store`; then the comparison.
async fn compare(
    options: &Options,
    before: &Launch,
    after: &Launch,
    upstream: &Upstream,
) -> anyhow::Result<()> {
    let backend = options.store.backends()[0];
    let store = Store::start(backend).await?;
    let mut figures: [Vec<Vec<Figure>>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=options.rounds.max(1) {
        for (side, launch) in [before, after].into_iter().enumerate() {
            println!(
                "\n=== round {round}, {}: {}",
                ["before", "after"][side],
                label(launch)
            );
            let run = scenarios_on(options, launch, upstream, &store).await?;
            let mut these = figures::of_store_run(&run);
            if options.selects("idle") {
                let rows = idle::measure(launch, upstream, 1).await;
                these.extend(figures::of_idle(&rows));
            }
            figures[side].push(these);
        }
    }
    println!();
    let [before_runs, after_runs] = &figures;
    let rows = compare::rows(before_runs, after_runs);
    report::comparison(&rows, options.rounds.max(1), &label(before), &label(after));
    Ok(())
}

/// A host of `launch` on `store`, warmed up, through the selected scenarios S1–S3; then S4 on
/// a fresh host of its own, when selected.
async fn scenarios_on(
    options: &Options,
    launch: &Launch,
    upstream: &Upstream,
    store: &Store,
) -> anyhow::Result<StoreRun> {
    let backend = store.backend;
    let setup = store.setup().await?;
    let mut host = HostProcess::launch(launch, &upstream.base_url, Flavour::Plain, &setup).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = host.memory()?.rss;
    println!(
        "\nhost on {}: idle RSS after start: {}",
        backend.name(),
        report::mib(idle)
    );
    warm_up(&host).await;

    let mut outcomes = Vec::new();
    for mut scenario in scenarios(options, backend) {
        scenario.sample_threads = options.thread_states;
        if !options.selects(scenario.name) {
            continue;
        }
        println!();
        let outcome = load::run(scenario, &host, store, upstream).await;
        report::scenario(&outcome, upstream.own_time(outcome.scenario.pace));
        if !host.alive() {
            anyhow::bail!(
                "the host died during {} on {}\n{}",
                outcome.scenario.name,
                backend.name(),
                host.log_tail()
            );
        }
        outcomes.push(outcome);
    }
    host.stop().await;
    let long = if options.selects("S4") {
        println!();
        let run = long_conversation::run(
            launch,
            upstream,
            &store.setup().await?,
            options.s4_turns,
            options.s4_tokenizer,
        )
        .await?;
        report::long(&run);
        Some(run)
    } else {
        None
    };
    Ok(StoreRun {
        idle,
        outcomes,
        long,
    })
}

/// S1, S2 and S3 as `options` set them, on `store`.
fn scenarios(options: &Options, store: Backend) -> [Scenario; 3] {
    [
        Scenario {
            name: "S1",
            store,
            clients: 1,
            duration: Duration::from_secs_f64(options.s1_secs),
            pace: Pace::FAST,
            sample_threads: false,
        },
        Scenario {
            name: "S2",
            store,
            clients: 32,
            duration: Duration::from_secs_f64(options.s2_secs),
            pace: Pace::FAST,
            sample_threads: false,
        },
        Scenario {
            name: "S3",
            store,
            clients: options.s3_clients,
            duration: Duration::from_secs_f64(options.s3_secs),
            pace: Pace {
                first: Duration::from_millis(200),
                between: Duration::from_millis(20),
            },
            sample_threads: false,
        },
    ]
}

impl Options {
    /// Whether the scenario called `name` runs.
    fn selects(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o.eq_ignore_ascii_case(name))
    }
}

/// The abuse scenario's attacks, each on a fresh host, printed as each ends.
async fn abuse(build: &std::path::Path, upstream: &Upstream) {
    for attack in abuse::Attack::ALL {
        println!();
        report::attack(attack);
        match abuse::run(attack, build, upstream).await {
            Ok(phase) => report::abuse(&phase),
            Err(e) => println!("  not run: {e:#}"),
        }
    }
}

/// A few conversations so connection pools, the database and the page cache are warm.
async fn warm_up(host: &HostProcess) {
    let http = reqwest::Client::new();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let http = http.clone();
            let url = host.url.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    let _ =
                        client::conversation(&http, &url, host::TOKEN, &format!("warm-{i}")).await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}
