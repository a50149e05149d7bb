//! What running a plugin in a sandboxed worker costs against running it in the server's
//! process: `read_path_meta` on a small file through `invoke`, warm, both ways interleaved
//! batch by batch (median per call), alone and with work just before and after it (as undo's
//! checkpoint around a changing call, here empty: what its placement costs); a worker's cold start (the first call on a new project:
//! a fork by the zygote, or an `exec` of the server's binary; sandbox, `dlopen`, the call), both
//! ways; and the memory of an idle worker (its RSS, its own pages, its share; median over the
//! workers the cold starts left alive) and of the zygote; beside them, what a bare round trip
//! through another process costs ([`crate::round_trip`]).

use std::{
    hint::black_box,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use cap_std::{ambient_authority, fs::Dir};
use rojos::plugins::{
    invoke, invoke_around, AroundCall, CallRequest, Isolation, Loader, Tool, ToolArgs, WorkerStart,
};
use rojos_plugin_api::Limits;

use crate::round_trip::{self, RoundTrip};

/// The figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Workers {
    /// A warm call through `invoke`, the plugin in the server's process.
    pub(crate) in_process: Duration,
    /// A warm call through `invoke`, the plugin in a worker.
    pub(crate) worker: Duration,
    /// A bare round trip through another process, both sides blocking.
    pub(crate) round_trip: RoundTrip,
    /// A warm call with empty work just before and after it, in the server's process.
    pub(crate) in_process_around: Duration,
    /// The same, the plugin in a worker.
    pub(crate) worker_around: Duration,
    /// The first call on a project with no worker yet: forked by the zygote, and by `exec`.
    pub(crate) cold_start: Duration,
    /// The same, each worker started by `exec` of the server's binary.
    pub(crate) cold_start_exec: Duration,
    /// Reading the manifest in a throwaway worker at load time.
    pub(crate) load: Duration,
    /// An idle worker's resident memory, forked by the zygote, in KiB.
    pub(crate) idle_rss_kib: Memory,
    /// The same for a worker started by `exec`.
    pub(crate) idle_rss_exec_kib: Memory,
    /// The zygote's own, in KiB.
    pub(crate) zygote_kib: Memory,
    /// How many cold starts (and idle workers) were measured.
    pub(crate) starts: usize,
}

/// One process's memory, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Memory {
    /// `VmRSS`: every resident page it maps, shared ones included.
    pub(crate) rss: u64,
    /// `RssAnon`: its anonymous pages, those it shares copy-on-write with the zygote included.
    pub(crate) anon: u64,
    /// `Private_Clean` + `Private_Dirty` of `smaps_rollup`: the pages no other process maps,
    /// what starting it cost.
    pub(crate) private: u64,
    /// `Pss`: its share of everything it maps.
    pub(crate) pss: u64,
}

const BATCHES: usize = 51;
const BATCH: usize = 200;
const STARTS: usize = 15;

/// Measures with the plugins and the `rojos` binary in `build`.
pub(crate) fn measure(build: &Path) -> anyhow::Result<Workers> {
    let library = build.join("librojos_tool_read_path_meta.so");
    let in_process = Loader::new(8)?
        .load(&library)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let loader = Loader::new(8)?.with_worker_program(build.join("rojos"));
    let started = Instant::now();
    let isolated = loader
        .load_as(&library, Isolation::Worker)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let load = started.elapsed();
    let exec_loader = Loader::new(8)?
        .with_worker_program(build.join("rojos"))
        .with_worker_start(WorkerStart::Exec);
    let exec_isolated = exec_loader
        .load_as(&library, Isolation::Worker)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let round_trip = round_trip::measure()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot build a runtime")?;
    // From a task on the runtime's workers, as the server's agent makes its calls (a
    // `block_on` thread is woken by another thread for every answer, a worker task is not).
    runtime.block_on(async {
        tokio::spawn(async move {
            let [warm_in, warm_worker, around_in, around_worker] =
                warm(&in_process, &isolated).await?;
            let (cold_exec, _exec_worlds) = cold(&exec_isolated).await?;
            let (cold, _worlds) = cold(&isolated).await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let median = |kind| -> anyhow::Result<Memory> {
                let mut all = memory_kib(kind)?;
                anyhow::ensure!(!all.is_empty(), "no {kind:?} process found");
                all.sort_unstable();
                Ok(all[all.len() / 2])
            };
            Ok(Workers {
                in_process: warm_in,
                worker: warm_worker,
                round_trip,
                in_process_around: around_in,
                worker_around: around_worker,
                cold_start: cold,
                cold_start_exec: cold_exec,
                load,
                idle_rss_kib: median(Kind::Forked)?,
                idle_rss_exec_kib: median(Kind::Exec)?,
                zygote_kib: median(Kind::Zygote)?,
                starts: STARTS,
            })
        })
        .await
        .context("the measuring task failed")?
    })
}

/// A project folder with `hello.txt`, and the request for a call on it.
fn project(id: &str) -> anyhow::Result<(tempfile::TempDir, CallRequest)> {
    let world = tempfile::tempdir()?;
    std::fs::write(world.path().join("hello.txt"), "hello")?;
    let dir = Dir::open_ambient_dir(world.path(), ambient_authority())?;
    let request = CallRequest {
        project_id: id.to_owned(),
        root: Arc::new(dir),
        root_path: world.path().to_owned(),
        limits: Limits::default(),
        timeout: Duration::from_secs(10),
        create_only: Vec::new(),
        stop: Default::default(),
    };
    Ok((world, request))
}

fn args() -> anyhow::Result<ToolArgs> {
    ToolArgs::try_from(serde_json::json!({"path": "hello.txt"}))
        .map_err(|v| anyhow::anyhow!("arguments {v} are not an object"))
}

/// Work just before and after a call that does nothing: what running it around the call
/// costs, beside the checkpoint's own work.
struct NoWork;

impl AroundCall for NoWork {
    fn before(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn after(&mut self) {}
}

/// Medians per call, batches interleaved: in-process, in a worker, and the same two with
/// [`NoWork`] around the call.
async fn warm(in_process: &Arc<Tool>, isolated: &Arc<Tool>) -> anyhow::Result<[Duration; 4]> {
    let (_world, request) = project("warm")?;
    let args = args()?;
    let first_in = invoke(in_process, &args, &request).await;
    let first_worker = invoke(isolated, &args, &request).await;
    anyhow::ensure!(
        first_in.is_ok() && first_in == first_worker,
        "in-process {first_in:?}, worker {first_worker:?}"
    );
    let mut times: [Vec<Duration>; 4] = Default::default();
    for _ in 0..BATCHES {
        for (series, (tool, around)) in [
            (in_process, false),
            (isolated, false),
            (in_process, true),
            (isolated, true),
        ]
        .into_iter()
        .enumerate()
        {
            let started = Instant::now();
            for _ in 0..BATCH {
                let args = black_box(&args);
                let _ = black_box(if around {
                    // As the agent calls it: the arguments were checked before.
                    invoke_around(tool, args, &request, Some(Box::new(NoWork))).await
                } else {
                    invoke(tool, args, &request).await
                });
            }
            times[series].push(started.elapsed() / BATCH as u32);
        }
    }
    Ok(times.map(|mut series| {
        series.sort();
        series[BATCHES / 2]
    }))
}

/// The first call on [`STARTS`] new projects (median); the projects stay, so their workers do.
async fn cold(isolated: &Arc<Tool>) -> anyhow::Result<(Duration, Vec<tempfile::TempDir>)> {
    let args = args()?;
    let mut worlds = Vec::new();
    let mut times = Vec::new();
    for i in 0..STARTS {
        let (world, request) = project(&format!("cold-{i}"))?;
        let started = Instant::now();
        let answer = invoke(isolated, &args, &request).await;
        times.push(started.elapsed());
        anyhow::ensure!(answer.is_ok(), "cold call: {answer:?}");
        worlds.push(world);
    }
    times.sort();
    Ok((times[STARTS / 2], worlds))
}

/// Which of this process's children to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Workers started by `exec` (their command line says `plugin-worker`).
    Exec,
    /// Workers forked by the zygote (their name says `plugin-worker`, their command line is
    /// the zygote's).
    Forked,
    /// The zygote.
    Zygote,
}

/// The memory of every child of this process of `kind`.
fn memory_kib(kind: Kind) -> anyhow::Result<Vec<Memory>> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path();
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let field = |text: &str, name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        };
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .map(str::trim);
        if parent != Some(me.as_str()) {
            continue;
        }
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let has_arg = |arg: &[u8]| cmdline.split(|b| *b == 0).any(|a| a == arg);
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let this = match comm.trim_end() {
            "plugin-worker" => Kind::Forked,
            "plugin-zygote" => Kind::Zygote,
            _ if has_arg(b"plugin-worker") => Kind::Exec,
            _ => continue,
        };
        if this != kind {
            continue;
        }
        // Readable by the server's user when it runs as root (workers are not dumpable).
        let rollup = std::fs::read_to_string(path.join("smaps_rollup")).unwrap_or_default();
        let private = field(&rollup, "Private_Clean:").unwrap_or(0)
            + field(&rollup, "Private_Dirty:").unwrap_or(0);
        if let (Some(rss), Some(anon)) = (field(&status, "VmRSS:"), field(&status, "RssAnon:")) {
            found.push(Memory {
                rss,
                anon,
                private,
                pss: field(&rollup, "Pss:").unwrap_or(0),
            });
        }
    }
    Ok(found)
}
