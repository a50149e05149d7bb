//! The cost of one tool call through the plugin boundary against the same tool code called
//! directly, in this process: `read_path_meta` on a small file, called four ways, each timed
//! as the median per-call time over batches.
//!
//! 1. `run`: the tool's logic on an already opened project (the plugin crate as an rlib);
//! 2. `Tool::call`: the plugin's entry point linked statically (parse the arguments, open the
//!    project from the context's descriptor, `run`);
//! 3. the C ABI: the loaded library's exported `call` (adds the context JSON, `catch_unwind`
//!    and the `RString` copies): the boundary proper is 3 − 2;
//! 4. `invoke`: what the server does for every call (adds the schema check, the arguments
//!    serialised to text, the per-plugin permit, `spawn_blocking` and the deadline).

use std::{
    hint::black_box,
    os::fd::AsRawFd,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use cap_std::{ambient_authority, fs::Dir};
use rojos::plugins::{invoke, CallRequest, Loader, ToolArgs};
use rojos_fs_guard::ProjectDir;
use rojos_plugin_api::{CallContext, Limits, Tool as _};
use rojos_tool_read_path_meta::{Args, ReadPathMeta};

/// Median time per call of each way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Boundary {
    /// 1: `run` on an opened project.
    pub(crate) run: Duration,
    /// 2: `Tool::call`, linked statically.
    pub(crate) entry: Duration,
    /// 3: the library's exported `call` through the C ABI.
    pub(crate) ffi: Duration,
    /// 4: `rojos::plugins::invoke`.
    pub(crate) invoke: Duration,
    /// A `spawn_blocking` round trip of an empty closure on the same runtime: the part of 4
    /// that is handing the call to a blocking thread and back.
    pub(crate) handoff: Duration,
}

const BATCHES: usize = 101;
const BATCH: usize = 200;

/// The median over [`BATCHES`] of the mean time of [`BATCH`] calls of `call`.
fn per_call(mut call: impl FnMut()) -> Duration {
    for _ in 0..BATCH {
        call();
    }
    let mut means: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..BATCH {
                call();
            }
            started.elapsed() / BATCH as u32
        })
        .collect();
    means.sort();
    means[BATCHES / 2]
}

/// Measures the four ways with the release build of the plugin in `build`.
pub(crate) fn measure(build: &Path) -> anyhow::Result<Boundary> {
    let world = tempfile::tempdir()?;
    std::fs::write(world.path().join("hello.txt"), "hello")?;
    let dir = Dir::open_ambient_dir(world.path(), ambient_authority())?;
    let limits = Limits::default();
    let context = CallContext {
        project_id: "bench".to_owned(),
        root_fd: dir.as_raw_fd(),
        limits,
        create_only: Vec::new(),
    };
    let context_json = serde_json::to_string(&context)?;
    let args = r#"{"path":"hello.txt"}"#;

    let loader = Loader::new(8)?;
    let tool = loader
        .load(&build.join("librojos_tool_read_path_meta.so"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let expected = ReadPathMeta::call(&context, args).map_err(|e| anyhow::anyhow!("{e}"))?;
    let through_ffi = tool.call_blocking(&context_json, args);
    anyhow::ensure!(
        through_ffi.as_deref() == Ok(expected.as_str()),
        "the plugin answered {through_ffi:?}, the direct call {expected:?}"
    );

    let project = ProjectDir::new(dir.try_clone()?, limits);
    let run = per_call(|| {
        let args = Args {
            path: "hello.txt".to_owned(),
        };
        let _ = black_box(rojos_tool_read_path_meta::run(&project, black_box(args)));
    });
    let entry = per_call(|| {
        let _ = black_box(ReadPathMeta::call(&context, black_box(args)));
    });
    let ffi = per_call(|| {
        let _ = black_box(tool.call_blocking(&context_json, black_box(args)));
    });
    let (invoke, handoff) = measure_invoke(&tool, dir, limits, &expected)?;
    Ok(Boundary {
        run,
        entry,
        ffi,
        invoke,
        handoff,
    })
}

/// `invoke` on a runtime like the host's (one worker per core), and a bare `spawn_blocking`.
fn measure_invoke(
    tool: &Arc<rojos::plugins::Tool>,
    dir: Dir,
    limits: Limits,
    expected: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot build a runtime")?;
    let request = CallRequest {
        project_id: "bench".to_owned(),
        root: Arc::new(dir),
        // Only per-project MCP servers read it; the bench calls a plugin.
        root_path: std::path::PathBuf::new(),
        limits,
        timeout: Duration::from_secs(10),
        create_only: Vec::new(),
        stop: Default::default(),
    };
    let args = ToolArgs::try_from(serde_json::json!({"path": "hello.txt"}))
        .map_err(|v| anyhow::anyhow!("arguments {v} are not an object"))?;
    let args = &args;
    runtime.block_on(async {
        let first = invoke(tool, args, &request).await;
        anyhow::ensure!(
            first.as_deref() == Ok(expected),
            "invoke answered {first:?}"
        );
        let mut means = Vec::with_capacity(BATCHES);
        let mut handoffs = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let started = Instant::now();
            for _ in 0..BATCH {
                let _ = black_box(invoke(tool, black_box(args), &request).await);
            }
            means.push(started.elapsed() / BATCH as u32);
            let started = Instant::now();
            for _ in 0..BATCH {
                let _ = black_box(tokio::task::spawn_blocking(|| black_box(1)).await);
            }
            handoffs.push(started.elapsed() / BATCH as u32);
        }
        means.sort();
        handoffs.sort();
        Ok((means[BATCHES / 2], handoffs[BATCHES / 2]))
    })
}
