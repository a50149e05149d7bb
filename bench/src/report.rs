//! Printing: the machine, each scenario's own figures (no other system's: cross-system ratios
//! come from the side-by-side harness, one run of both on one machine), the abuse scenario's
//! attacks with their goal, the plugin boundary, the drop-in deploy time, and a closing
//! Markdown table for bench/README.md with the performance goals beside the figures; with
//! `--store both`, each scenario on PostgreSQL beside SQLite (goal: within 20 %). S4, the
//! idle memory per plugin, the thread states and the before/after comparison print from the
//! submodules.

mod compare;
mod format;
mod idle;
mod long;
mod threads;

pub(crate) use compare::comparison;
pub(crate) use format::mib;
pub(crate) use idle::idle;
pub(crate) use long::long;
pub(crate) use threads::thread_states;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use format::{host_verdict, ms, verdict};

use crate::{
    abuse::{self, Attack, Finding, Phase},
    boundary::Boundary,
    client::Ending,
    host::ABUSE_HEADER_READ_TIMEOUT_SECS,
    load::Outcome,
    mcp_paths::McpPaths,
    stats::percentile,
    store::Backend,
    store_run::StoreRun,
    upstream::{FLOOD_CALLS, FLOOD_FILE, HUGE_LINE_BYTES},
    watch::PROBE_TIMEOUT,
};

/// The abuse goal: the host's peak stays under its idle RSS plus this, in bytes.
const ABUSE_MEMORY_HEADROOM: u64 = 64 << 20;
/// The abuse goal: `/healthz` p99 stays under this.
const ABUSE_HEALTHZ_P99: Duration = Duration::from_millis(50);
/// The PostgreSQL goal: S2 on PostgreSQL keeps at least this share of SQLite's throughput.
const POSTGRES_S2_SHARE: f64 = 0.8;
/// The performance goal: the host's CPU per conversation in S2 (on the 2-core machine).
const S2_CPU_PER_CONVERSATION: Duration = Duration::from_micros(350);
/// The performance goal: S3's p50 within this share over the upstream's own time.
const S3_P50_OVER_UPSTREAM: f64 = 0.10;
/// The performance goal: S3's first event p50 within this of the upstream's first token.
const S3_FIRST_EVENT_OVER_FIRST_TOKEN: Duration = Duration::from_millis(50);
/// The performance goal: S3's peak RSS no higher than the day the issue was filed.
const S3_PEAK_RSS: u64 = 108 << 20;

struct Percentiles {
    p50: Duration,
    p95: Duration,
    p99: Duration,
    max: Duration,
}

fn percentiles(mut values: Vec<Duration>) -> Percentiles {
    values.sort();
    Percentiles {
        p50: percentile(&values, 50.0),
        p95: percentile(&values, 95.0),
        p99: percentile(&values, 99.0),
        max: values.last().copied().unwrap_or_default(),
    }
}

/// The date, the machine and the build, as the README table quotes them.
pub(crate) fn machine(binary: &std::path::Path) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(
            || "?".to_owned(),
            |kib| format!("{:.1} GiB", kib as f64 / 1048576.0),
        );
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!(
        "rojos-bench {} — {cores} cores ({cpu}), {memory} RAM, Linux {}",
        today(),
        kernel.trim()
    );
    println!(
        "host: {} as a separate process; clients and the scripted upstream share the machine (this process)",
        binary.display()
    );
    let folders = std::env::temp_dir();
    println!(
        "hosts' folders: {} ({})",
        folders.display(),
        crate::scratch::describe(&folders)
    );
}

/// Today's UTC date, `YYYY-MM-DD`.
fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn describe(outcome: &Outcome) -> String {
    let s = &outcome.scenario;
    let pace = if s.pace.first.is_zero() && s.pace.between.is_zero() {
        "no upstream delay".to_owned()
    } else {
        format!(
            "upstream {} to first token, {} between chunks",
            ms(s.pace.first),
            ms(s.pace.between)
        )
    };
    let clients = if s.clients == 1 {
        "1 client".to_owned()
    } else {
        format!("{} clients", s.clients)
    };
    let answer = crate::upstream::chosen_answer().map_or_else(String::new, |answer| {
        format!(", the answer in {} token-sized chunks", answer.chunks())
    });
    format!(
        "{} on {}: {clients}, {pace}{answer}",
        s.name,
        s.store.name()
    )
}

/// A pause in a stream this long is counted: several times the scripted upstream's longest
/// (a turn's 200 ms to first token in S3).
const LONG_PAUSE: Duration = Duration::from_secs(1);

/// One scenario's figures: Rojos's own, no other system's.
pub(crate) fn scenario(outcome: &Outcome, scripted: Duration) {
    let n = outcome.samples.len();
    let latency = percentiles(outcome.samples.iter().map(|s| s.latency).collect());
    let first = percentiles(outcome.samples.iter().map(|s| s.first_event).collect());
    let pauses: Vec<Duration> = outcome.samples.iter().map(|s| s.longest_pause).collect();
    let paused_long = pauses.iter().filter(|p| **p > LONG_PAUSE).count();
    let pause = percentiles(pauses);
    println!(
        "{} ({:.1} s of new conversations)",
        describe(outcome),
        outcome.scenario.duration.as_secs_f64()
    );
    println!(
        "  conversations   {n} complete and valid, {} errors, in {:.2} s",
        outcome.errors,
        outcome.elapsed.as_secs_f64()
    );
    for text in &outcome.error_texts {
        println!("    error: {text}");
    }
    println!(
        "  throughput      {:.0} conversations/s",
        outcome.throughput()
    );
    println!(
        "  latency         p50 {}  p95 {}  p99 {}  max {}",
        ms(latency.p50),
        ms(latency.p95),
        ms(latency.p99),
        ms(latency.max)
    );
    println!(
        "  first event     p50 {}  p95 {}  p99 {}",
        ms(first.p50),
        ms(first.p95),
        ms(first.p99)
    );
    println!(
        "  longest pause   p50 {}  p99 {}  max {}  in a conversation's stream once it began; {paused_long} conversations paused over {}",
        ms(pause.p50),
        ms(pause.p99),
        ms(pause.max),
        ms(LONG_PAUSE)
    );
    println!(
        "  upstream alone  {} per conversation measured directly ({} scripted delays); host overhead at p50 {}",
        ms(outcome.upstream_alone),
        ms(scripted),
        ms(latency.p50.saturating_sub(outcome.upstream_alone))
    );
    if !outcome.upstream_late.is_empty() {
        let late = percentiles(outcome.upstream_late.clone());
        println!(
            "  upstream late   each turn's last chunk p50 {}  p95 {}  max {} after its time (the bench's own upstream, starved by this machine; three turns per conversation)",
            ms(late.p50),
            ms(late.p95),
            ms(late.max)
        );
    }
    if n > 0 {
        let cpu = outcome.host_cpu;
        let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
        println!(
            "  CPU             host {:.2} s = {:.0} µs per conversation (user {:.0} + system {:.0}; {:.2} cores); bench {:.2} s",
            cpu.total().as_secs_f64(),
            per(cpu.total()),
            per(cpu.user),
            per(cpu.system),
            cpu.total().as_secs_f64() / outcome.elapsed.as_secs_f64(),
            outcome.bench_cpu.as_secs_f64()
        );
        if outcome.children_alive > 0 || !outcome.children_cpu.is_zero() {
            println!(
                "  child processes {:.2} s = {:.0} µs per conversation (the plugin zygote and workers, ended ones included); host + children {:.0} µs; {} alive at the end",
                outcome.children_cpu.as_secs_f64(),
                per(outcome.children_cpu),
                per(cpu.total() + outcome.children_cpu),
                outcome.children_alive
            );
        }
        if let (Some(runtime), Some((busy, parks))) =
            (outcome.runtime, outcome.busy_cores_and_parks())
        {
            println!(
                "  runtime         workers busy {busy:.2} cores; {parks:.1} parks per conversation (a worker put to sleep with nothing to run); the host reports {:.0} µs of CPU per conversation",
                per(runtime.reported_cpu)
            );
        }
        if let Some((p50, max)) = outcome.queue() {
            println!(
                "  runtime queue   p50 {p50:.0}  max {max:.0} tasks waiting for a worker ({} readings, one every {} s)",
                outcome.queued.len(),
                crate::watch::QUEUE_READ_EVERY.as_secs_f64()
            );
        }
        if let Some(store) = outcome.store_cpu {
            println!(
                "  store CPU       PostgreSQL server {:.2} s = {:.0} µs per conversation ({:.2} cores)",
                store.as_secs_f64(),
                store.as_secs_f64() * 1e6 / n as f64,
                store.as_secs_f64() / outcome.elapsed.as_secs_f64()
            );
        }
    }
    println!("  host peak RSS   {}", mib(outcome.peak_rss));
    let (probes, failed) = &outcome.healthz;
    let health = percentiles(probes.clone());
    println!(
        "  /healthz        p50 {}  p99 {}  max {}  ({} probes, {failed} failed)",
        ms(health.p50),
        ms(health.p99),
        ms(health.max),
        probes.len()
    );
    if let Some(states) = &outcome.threads {
        thread_states(states);
    }
}

/// The heading of an attack, before it runs.
pub(crate) fn attack(attack: Attack) {
    println!("{}", describe_attack(attack));
}

/// One attack of the abuse scenario: memory, `/healthz`, what the attack saw, the goal.
pub(crate) fn abuse(phase: &Phase) {
    println!("  took            {:.2} s", phase.elapsed.as_secs_f64());
    let growth = phase.peak_rss.saturating_sub(phase.idle_rss);
    println!(
        "  host RSS        idle {}, peak {} (+{})",
        mib(phase.idle_rss),
        mib(phase.peak_rss),
        mib(growth)
    );
    let (probes, failed) = &phase.healthz;
    let health = percentiles(probes.clone());
    println!(
        "  /healthz        p50 {}  p99 {}  max {}  ({} answered, {failed} failed; one every {})",
        ms(health.p50),
        ms(health.p99),
        ms(health.max),
        probes.len(),
        ms(abuse::PROBE_EVERY)
    );
    match &phase.finding {
        Finding::Chat { ending, stored } => chat_ending(ending, stored.as_ref()),
        Finding::Heads(heads) => {
            println!(
                "  connections     {} opened in {:.2} s, {} failed{}",
                heads.opened,
                heads.opening.as_secs_f64(),
                heads.failed.0,
                heads
                    .failed
                    .1
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (first: {e})"))
            );
            println!(
                "  after the hold  {} closed by the server, {} answered by it, {} still open",
                heads.closed,
                heads.answered,
                heads.opened - heads.closed
            );
        }
    }
    if let Some(log) = &phase.host_died {
        println!("  the host DIED during the attack\n{log}");
    }
    abuse_goal(phase);
}

fn describe_attack(attack: Attack) -> String {
    match attack {
        Attack::ToolFlood => format!(
            "abuse: tool-call flood: one turn of {FLOOD_CALLS} get_text_content calls on {FLOOD_FILE} ({:.1} MB; paths spelt ./ .// apart), then a text answer",
            abuse::FLOOD_FILE_BYTES as f64 / 1e6
        ),
        Attack::HugeLine => format!(
            "abuse: huge line: the upstream answers with one SSE data: line of {:.0} MB (its content), written in 64 KiB pieces",
            HUGE_LINE_BYTES as f64 / 1e6
        ),
        Attack::PartialHeads => format!(
            "abuse: partial heads: {} connections send {:?} and then nothing, held {} s once open (header_read_timeout_secs = {ABUSE_HEADER_READ_TIMEOUT_SECS}); /healthz from fresh connections",
            abuse::CONNECTIONS,
            String::from_utf8_lossy(abuse::PARTIAL_HEAD),
            abuse::HOLD.as_secs()
        ),
    }
}

fn chat_ending(ending: &Ending, stored: Option<&Result<abuse::Stored, String>>) {
    println!(
        "  chat            DONE {}; {} TOOL_CALL, TOOL_RESULT {} ok / {} errors; CHAT text {}; NDJSON {}",
        ending.stop_reason.as_deref().unwrap_or("never came"),
        ending.tool_calls,
        ending.results.0,
        ending.results.1,
        if ending.chat_bytes < 1 << 20 {
            format!("{} bytes", ending.chat_bytes)
        } else {
            mib(ending.chat_bytes)
        },
        mib(ending.body_bytes)
    );
    for error in &ending.errors {
        println!("    ERROR event: {error}");
    }
    if let Some(problem) = &ending.problem {
        println!("    stream problem: {problem}");
    }
    match stored {
        Some(Ok(s)) => println!(
            "  stored          GET /conversations/{{id}}: {} in {} message(s), {} page(s)",
            mib(s.bytes),
            s.messages,
            s.pages
        ),
        Some(Err(e)) => println!("  stored          GET /conversations/{{id}} failed: {e}"),
        None => {}
    }
}

/// The goal line: peak under idle + 64 MiB, `/healthz` p99 under 50 ms (failed probes count as
/// the probe timeout).
fn abuse_goal(phase: &Phase) {
    let limit = phase.idle_rss + ABUSE_MEMORY_HEADROOM;
    let (probes, failed) = &phase.healthz;
    let mut all = probes.clone();
    all.extend(std::iter::repeat_n(PROBE_TIMEOUT, *failed as usize));
    let p99 = percentiles(all).p99;
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    println!(
        "  goal            peak {} < idle + 64 MiB = {} {}; /healthz p99 {} < {} {}{}",
        mib(phase.peak_rss),
        mib(limit),
        mark(phase.peak_rss < limit),
        ms(p99),
        ms(ABUSE_HEALTHZ_P99),
        mark(p99 < ABUSE_HEALTHZ_P99 && !probes.is_empty()),
        if *failed > 0 {
            format!(" (failed probes counted as {})", ms(PROBE_TIMEOUT))
        } else {
            String::new()
        }
    );
}

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

/// The figures table (Rojos's own figures) and the performance goals that S1–S3 measure.
pub(crate) fn summary(runs: &[StoreRun], boundary: Option<&Boundary>, dropin: Option<&[Duration]>) {
    let outcomes: Vec<(u64, &Outcome)> = runs
        .iter()
        .flat_map(|run| run.outcomes.iter().map(|o| (run.idle, o)))
        .collect();
    if !outcomes.is_empty() {
        println!("| scenario | conversations/s | latency p50 / p95 / p99 | first event p50 | errors | host CPU per conversation (user + system) | host RSS |");
        println!("|---|---|---|---|---|---|---|");
    }
    for &(idle, o) in &outcomes {
        let l = percentiles(o.samples.iter().map(|s| s.latency).collect());
        let f = percentiles(o.samples.iter().map(|s| s.first_event).collect());
        let n = o.samples.len() as f64;
        let per = |d: Duration| d.as_secs_f64() * 1e6 / n;
        let cpu = if o.samples.is_empty() {
            "n/a".to_owned()
        } else {
            format!(
                "{:.0} µs ({:.0} + {:.0})",
                per(o.host_cpu.total()),
                per(o.host_cpu.user),
                per(o.host_cpu.system)
            )
        };
        println!(
            "| {} | {:.0} | {} / {} / {} | {} | {} | {cpu} | idle {}, peak {} |",
            describe(o),
            o.throughput(),
            ms(l.p50),
            ms(l.p95),
            ms(l.p99),
            ms(f.p50),
            o.errors,
            mib(idle),
            mib(o.peak_rss)
        );
    }
    if !outcomes.is_empty() {
        println!();
        println!("(Rojos's own figures; ratios against another system come only from one run of the side-by-side harness.)");
    }
    for &(_, o) in &outcomes {
        goal(o);
    }
    if let Some(b) = boundary {
        let extra = b.invoke.saturating_sub(b.entry);
        let abi = b.ffi.saturating_sub(b.entry);
        println!(
            "goal boundary: the C ABI crossing costs +{:.2} µs — {}; a call through the host's invoke +{:.1} µs, {:.1} µs of it the spawn_blocking round trip",
            abi.as_secs_f64() * 1e6,
            if abi < Duration::from_micros(3) { "met" } else { "NOT met" },
            extra.as_secs_f64() * 1e6,
            b.handoff.as_secs_f64() * 1e6,
        );
    }
    match dropin {
        Some(times) => println!(
            "drop-in: arrival → callable median {}",
            ms(percentiles(times.to_vec()).p50)
        ),
        None => println!("drop-in: n/a (not measured)"),
    }
}

/// The performance goal line of one scenario (the CPU goal is this 2-core machine's figure).
fn goal(o: &Outcome) {
    let store = o.scenario.store.name();
    let l = percentiles(o.samples.iter().map(|s| s.latency).collect());
    match o.scenario.name {
        "S2" => {
            let per = cpu_per_conversation(o).unwrap_or(Duration::MAX);
            println!(
                "goal S2 on {store}: host CPU per conversation ≤ {} (a third of 2026-12-01's, on that day's 2-core machine; on another day, --baseline against fcd1bc6, where the performance work began, ≤ 0.33): {} — {}",
                micros(Some(S2_CPU_PER_CONVERSATION)),
                micros(cpu_per_conversation(o)),
                host_verdict(per <= S2_CPU_PER_CONVERSATION)
            );
        }
        "S3" => {
            let f = percentiles(o.samples.iter().map(|s| s.first_event).collect());
            let over = l.p50.as_secs_f64() / o.upstream_alone.as_secs_f64() - 1.0;
            let first_limit = o.scenario.pace.first + S3_FIRST_EVENT_OVER_FIRST_TOKEN;
            println!(
                "goal S3 on {store}: zero errors: {} — {}; p50 {} within {:.0} % of the upstream's own {}: {:+.1} % — {}; first event p50 {} < {} — {}; peak RSS {} ≤ {} — {}",
                o.errors,
                verdict(o.errors == 0),
                ms(l.p50),
                S3_P50_OVER_UPSTREAM * 100.0,
                ms(o.upstream_alone),
                over * 100.0,
                verdict(over <= S3_P50_OVER_UPSTREAM),
                ms(f.p50),
                ms(first_limit),
                verdict(f.p50 < first_limit),
                mib(o.peak_rss),
                mib(S3_PEAK_RSS),
                host_verdict(o.peak_rss <= S3_PEAK_RSS)
            );
        }
        _ => {}
    }
}

/// Each scenario run on both stores, PostgreSQL beside SQLite: throughput and their ratio,
/// the host's CPU per conversation (the difference is what the store costs the host), the
/// PostgreSQL server's CPU per conversation, latency; then the S2 goal.
pub(crate) fn stores(sqlite: &StoreRun, postgres: &StoreRun) {
    let pairs: Vec<(&Outcome, &Outcome)> = sqlite
        .outcomes
        .iter()
        .filter_map(|s| {
            let p = postgres
                .outcomes
                .iter()
                .find(|p| p.scenario.name == s.scenario.name)?;
            Some((s, p))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    println!(
        "{} beside {} (same machine, same build, a fresh host each; the PostgreSQL server runs on this machine too)",
        Backend::Postgres.name(),
        Backend::Sqlite.name()
    );
    println!("| scenario | conversations/s SQLite / PostgreSQL | PostgreSQL ÷ SQLite | host CPU per conversation SQLite / PostgreSQL | PostgreSQL server CPU per conversation | latency p50 SQLite / PostgreSQL | errors |");
    println!("|---|---|---|---|---|---|---|");
    for (s, p) in &pairs {
        println!(
            "| {} | {:.0} / {:.0} | {:.2} | {} / {} ({}) | {} | {} / {} | {} / {} |",
            s.scenario.name,
            s.throughput(),
            p.throughput(),
            share(p, s),
            micros(cpu_per_conversation(s)),
            micros(cpu_per_conversation(p)),
            store_cost(s, p),
            micros(server_cpu_per_conversation(p)),
            ms(percentiles(s.samples.iter().map(|x| x.latency).collect()).p50),
            ms(percentiles(p.samples.iter().map(|x| x.latency).collect()).p50),
            s.errors,
            p.errors
        );
    }
    for (s, p) in &pairs {
        if s.scenario.name == "S2" {
            println!(
                "goal S2 on PostgreSQL: ≥ {:.0} % of SQLite's throughput: {:.0} % — {}; per conversation PostgreSQL costs the host {} of CPU and its server {}",
                POSTGRES_S2_SHARE * 100.0,
                share(p, s) * 100.0,
                if share(p, s) >= POSTGRES_S2_SHARE { "met" } else { "NOT met" },
                store_cost(s, p),
                micros(server_cpu_per_conversation(p))
            );
        }
    }
}

/// PostgreSQL's throughput as a share of SQLite's (0 when SQLite completed nothing).
fn share(postgres: &Outcome, sqlite: &Outcome) -> f64 {
    let base = sqlite.throughput();
    if base > 0.0 {
        postgres.throughput() / base
    } else {
        0.0
    }
}

/// The host's CPU time per completed conversation; none when none completed.
fn cpu_per_conversation(outcome: &Outcome) -> Option<Duration> {
    let n = u32::try_from(outcome.samples.len())
        .ok()
        .filter(|&n| n > 0)?;
    Some(outcome.host_cpu.total() / n)
}

/// The PostgreSQL server's CPU time per completed conversation, when measured.
fn server_cpu_per_conversation(outcome: &Outcome) -> Option<Duration> {
    let n = u32::try_from(outcome.samples.len())
        .ok()
        .filter(|&n| n > 0)?;
    Some(outcome.store_cpu? / n)
}

/// PostgreSQL's host CPU per conversation less SQLite's, signed, in µs.
fn store_cost(sqlite: &Outcome, postgres: &Outcome) -> String {
    match (cpu_per_conversation(sqlite), cpu_per_conversation(postgres)) {
        (Some(s), Some(p)) => format!("{:+.0} µs", (p.as_secs_f64() - s.as_secs_f64()) * 1e6),
        _ => "n/a".to_owned(),
    }
}

fn micros(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.0} µs", d.as_secs_f64() * 1e6),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(store: Backend, conversations: usize, cpu_ms: u64) -> Outcome {
        Outcome::of_s2(store, conversations, cpu_ms)
    }

    #[test]
    fn postgres_is_compared_with_sqlite_per_conversation() {
        let sqlite = outcome(Backend::Sqlite, 1000, 5_000);
        let mut postgres = outcome(Backend::Postgres, 850, 5_100);
        postgres.store_cpu = Some(Duration::from_millis(1_700));
        assert_eq!(
            server_cpu_per_conversation(&postgres),
            Some(Duration::from_millis(2))
        );
        assert_eq!(server_cpu_per_conversation(&sqlite), None);
        assert!((share(&postgres, &sqlite) - 0.85).abs() < 1e-9);
        assert_eq!(
            cpu_per_conversation(&sqlite),
            Some(Duration::from_millis(5))
        );
        assert_eq!(
            cpu_per_conversation(&postgres),
            Some(Duration::from_secs_f64(5.1 / 850.0))
        );
        // 6000 µs − 5000 µs.
        assert_eq!(store_cost(&sqlite, &postgres), "+1000 µs");
        assert_eq!(store_cost(&postgres, &sqlite), "-1000 µs");
        let none = outcome(Backend::Postgres, 0, 5_000);
        assert_eq!(cpu_per_conversation(&none), None);
        assert_eq!(store_cost(&sqlite, &none), "n/a");
        assert_eq!(share(&sqlite, &none), 0.0);
    }

    #[test]
    fn the_store_is_named_in_each_scenario() {
        assert_eq!(
            describe(&outcome(Backend::Postgres, 1, 1)),
            "S2 on PostgreSQL: 32 clients, no upstream delay"
        );
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
