//! The plugins' own figures: the cost of the plugin boundary, a plugin in a sandboxed worker
//! against in-process, one tool call through each path (plugin, MCP stdio, MCP over HTTP) and
//! the drop-in deploy time.

use std::time::Duration;

use super::format::ms;
use super::percentiles::percentiles;
use crate::{boundary::Boundary, mcp_paths::McpPaths};

/// The plugin boundary figures.
pub(crate) fn boundary(b: &Boundary) {
    let ns = |d: Duration| d.as_secs_f64() * 1e9;
    println!("plugin boundary: read_path_meta on a 5-byte file, median per call");
    println!(
        "  1 tool code, direct (run on an opened project)      {:>8.0} ns",
        ns(b.run)
    );
    println!(
        "  2 tool entry, direct (Tool::call: args, fd, run)    {:>8.0} ns",
        ns(b.entry)
    );
    println!(
        "  3 through the C ABI (exported call from the .so)    {:>8.0} ns   boundary 3−2: {:+.0} ns ({:.2}×)",
        ns(b.ffi),
        ns(b.ffi) - ns(b.entry),
        ns(b.ffi) / ns(b.entry)
    );
    println!(
        "  4 through the host (invoke: schema, permit, spawn_blocking, deadline) {:>8.0} ns   4−2: {:+.2} µs ({:.2}×)",
        ns(b.invoke),
        (ns(b.invoke) - ns(b.entry)) / 1000.0,
        ns(b.invoke) / ns(b.entry)
    );
    println!(
        "    of which a spawn_blocking round trip (empty closure, same runtime)  {:>8.0} ns",
        ns(b.handoff)
    );
}

/// A plugin in a worker against in-process.
pub(crate) fn workers(w: &crate::workers::Workers) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("plugin workers: read_path_meta on a 5-byte file through invoke");
    println!(
        "  warm call, in-process   {:>8.1} µs (median per call)",
        us(w.in_process)
    );
    println!(
        "  warm call, in a worker  {:>8.1} µs ({:.2}×; goal: no more than in-process)",
        us(w.worker),
        us(w.worker) / us(w.in_process)
    );
    println!(
        "  the same with work just before and after (undo's place, empty): in-process {:.1} µs, in a worker {:.1} µs ({:.2}×)",
        us(w.in_process_around),
        us(w.worker_around),
        us(w.worker_around) / us(w.in_process_around)
    );
    let trip = &w.round_trip;
    println!(
        "  a bare round trip through another process (cat, 200 bytes each way, both sides blocking) {:.1} µs, CPU of both {}",
        us(trip.wall),
        trip.cpu
            .map_or_else(|| "n/a (no schedstat)".to_owned(), |cpu| format!("{:.1} µs", us(cpu)))
    );
    println!(
        "  cold start (first call on a new project: fork by the zygote, sandbox, dlopen, call) {:>7.2} ms (median of {}; goal ≤ 50 ms)",
        us(w.cold_start) / 1000.0,
        w.starts
    );
    println!(
        "  cold start, the worker started by exec instead                                     {:>7.2} ms (median of {})",
        us(w.cold_start_exec) / 1000.0,
        w.starts
    );
    println!(
        "  load (manifest read in a throwaway worker) {:>7.2} ms",
        us(w.load) / 1000.0
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let memory = |what: &str, m: &crate::workers::Memory| {
        println!(
            "  {what:<34} RSS {:>6.1} MiB, anonymous {:>5.1} MiB, its own (private) {:>5.1} MiB, PSS {:>5.1} MiB",
            mib(m.rss),
            mib(m.anon),
            mib(m.private),
            mib(m.pss)
        );
    };
    memory("idle worker, forked (goal ≤ 4 MiB)", &w.idle_rss_kib);
    memory("idle worker, by exec", &w.idle_rss_exec_kib);
    memory("the zygote", &w.zygote_kib);
    println!("  (medians over the {} workers of each kind)", w.starts);
}

/// One tool call through each path, side by side.
pub(crate) fn mcp_paths(p: &McpPaths) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("one tool call through each path: read_path_meta on a 5-byte file, one client, median per call");
    let line = |name: &str, d: Duration, what: &str| {
        println!(
            "  {name:<18} {:>8.1} µs   {:>+8.1} µs over the plugin   {:>7.0} calls/s   {what}",
            us(d),
            us(d) - us(p.plugin),
            1.0 / d.as_secs_f64()
        );
    };
    line(
        "plugin",
        p.plugin,
        "invoke: schema, permit, spawn_blocking, the .so's call",
    );
    line(
        "MCP stdio",
        p.stdio,
        "+ JSON-RPC over pipes to `rojos mcp`, its invoke, the result back",
    );
    line(
        "MCP over HTTP",
        p.http,
        "+ a POST on loopback to a host's /mcp (token check, session), its invoke, the answer",
    );
}

/// The drop-in deploy times.
pub(crate) fn dropin(times: &[Duration]) {
    let shown: Vec<String> = times.iter().map(|t| ms(*t)).collect();
    let median = percentiles(times.to_vec()).p50;
    println!(
        "drop-in folder: mv of a plugin into [plugins].dir → tool offered by GET /tools: median {} ({})",
        ms(median),
        shown.join(", ")
    );
}
