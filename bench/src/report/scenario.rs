//! One scenario's own figures (S1–S3): conversations, throughput, latency, first event, the
//! longest pause, the upstream's own time, the CPU of the host, its children, its runtime and
//! the store, memory and `/healthz`.

use std::time::Duration;

use super::format::{mib, ms};
use super::percentiles::percentiles;
use super::threads::thread_states;
use crate::load::Outcome;

/// What a scenario ran: its name, store, clients, the upstream's pace and answer.
pub(super) fn describe(outcome: &Outcome) -> String {
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
        if let Some(stolen) = outcome.stolen {
            println!(
                "  machine         {:.1} % of the CPUs' time stolen by the hypervisor (/proc/stat steal): CPU figures of runs far apart in it are not comparable",
                stolen * 100.0
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Backend;

    fn outcome(store: Backend, conversations: usize, cpu_ms: u64) -> Outcome {
        Outcome::of_s2(store, conversations, cpu_ms)
    }

    #[test]
    fn the_store_is_named_in_each_scenario() {
        assert_eq!(
            describe(&outcome(Backend::Postgres, 1, 1)),
            "S2 on PostgreSQL: 32 clients, no upstream delay"
        );
    }
}
