//! What running a plugin in a sandboxed worker costs against running it in the server's
//! process: `read_path_meta` on a small file through `invoke`, warm, both ways interleaved
//! batch by batch (median per call); a worker's cold start (the first call on a new project:
//! spawn, sandbox, `dlopen`, the call); and the memory of an idle worker (its RSS, median over
//! the workers the cold starts left alive).

use std::{
    hint::black_box,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use cap_std::{ambient_authority, fs::Dir};
use rojos::plugins::{invoke, CallRequest, Isolation, Loader, Tool, ToolArgs};
use rojos_plugin_api::Limits;

/// The figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Workers {
    /// A warm call through `invoke`, the plugin in the server's process.
    pub(crate) in_process: Duration,
    /// A warm call through `invoke`, the plugin in a worker.
    pub(crate) worker: Duration,
    /// The first call on a project with no worker yet.
    pub(crate) cold_start: Duration,
    /// Reading the manifest in a throwaway worker at load time.
    pub(crate) load: Duration,
    /// An idle worker's resident memory, in KiB: all of it (the binary's shared pages
    /// included), and its own (anonymous) pages.
    pub(crate) idle_rss_kib: (u64, u64),
    /// How many cold starts (and idle workers) were measured.
    pub(crate) starts: usize,
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot build a runtime")?;
    // From a task on the runtime's workers, as the server's agent makes its calls (a
    // `block_on` thread is woken by another thread for every answer, a worker task is not).
    runtime.block_on(async {
        tokio::spawn(async move {
            let (warm_in, warm_worker) = warm(&in_process, &isolated).await?;
            let (cold, rss, _worlds) = cold(&isolated).await?;
            Ok(Workers {
                in_process: warm_in,
                worker: warm_worker,
                cold_start: cold,
                load,
                idle_rss_kib: rss,
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
    };
    Ok((world, request))
}

fn args() -> anyhow::Result<ToolArgs> {
    ToolArgs::try_from(serde_json::json!({"path": "hello.txt"}))
        .map_err(|v| anyhow::anyhow!("arguments {v} are not an object"))
}

/// Medians per call, in-process and in a worker, batches interleaved.
async fn warm(
    in_process: &Arc<Tool>,
    isolated: &Arc<Tool>,
) -> anyhow::Result<(Duration, Duration)> {
    let (_world, request) = project("warm")?;
    let args = args()?;
    let first_in = invoke(in_process, &args, &request).await;
    let first_worker = invoke(isolated, &args, &request).await;
    anyhow::ensure!(
        first_in.is_ok() && first_in == first_worker,
        "in-process {first_in:?}, worker {first_worker:?}"
    );
    let mut ins = Vec::with_capacity(BATCHES);
    let mut workers = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        for (tool, times) in [(in_process, &mut ins), (isolated, &mut workers)] {
            let started = Instant::now();
            for _ in 0..BATCH {
                let _ = black_box(invoke(tool, black_box(&args), &request).await);
            }
            times.push(started.elapsed() / BATCH as u32);
        }
    }
    ins.sort();
    workers.sort();
    Ok((ins[BATCHES / 2], workers[BATCHES / 2]))
}

/// The first call on [`STARTS`] new projects (median), then the idle workers' RSS (median).
async fn cold(
    isolated: &Arc<Tool>,
) -> anyhow::Result<(Duration, (u64, u64), Vec<tempfile::TempDir>)> {
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
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rss = worker_rss_kib()?;
    anyhow::ensure!(!rss.is_empty(), "no worker process found");
    rss.sort_unstable();
    Ok((times[STARTS / 2], rss[rss.len() / 2], worlds))
}

/// `VmRSS` and `RssAnon` of every `plugin-worker` child of this process.
fn worker_rss_kib() -> anyhow::Result<Vec<(u64, u64)>> {
    let me = std::process::id().to_string();
    let mut rss = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path();
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().trim_end_matches(" kB").trim().to_owned())
        };
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        if field("PPid:").as_deref() == Some(me.as_str())
            && cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == b"plugin-worker")
        {
            let kib = |name| field(name).and_then(|v| v.parse::<u64>().ok());
            if let (Some(all), Some(anon)) = (kib("VmRSS:"), kib("RssAnon:")) {
                rss.push((all, anon));
            }
        }
    }
    Ok(rss)
}
