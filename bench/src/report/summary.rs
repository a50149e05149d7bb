//! The closing Markdown table for bench/README.md (Rojos's own figures) with the performance
//! goals that S1–S3 measure beside them, the plugin boundary's and the drop-in's.

use std::time::Duration;

use super::format::{host_verdict, mib, micros, ms, verdict};
use super::percentiles::percentiles;
use super::scenario::describe;
use super::stores::cpu_per_conversation;
use crate::{boundary::Boundary, load::Outcome, store_run::StoreRun};

/// The performance goal: the host's CPU per conversation in S2 (on the 2-core machine).
const S2_CPU_PER_CONVERSATION: Duration = Duration::from_micros(350);
/// The performance goal: S3's p50 within this share over the upstream's own time.
const S3_P50_OVER_UPSTREAM: f64 = 0.10;
/// The performance goal: S3's first event p50 within this of the upstream's first token.
const S3_FIRST_EVENT_OVER_FIRST_TOKEN: Duration = Duration::from_millis(50);
/// The performance goal: S3's peak RSS no higher than the day the issue was filed.
const S3_PEAK_RSS: u64 = 108 << 20;

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
