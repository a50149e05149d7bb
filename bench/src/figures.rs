//! Rojos's own figures, named, so a run can be summarised and two host binaries compared
//! figure by figure (`compare`): per load scenario its throughput, latency percentiles, first
//! event, CPU per conversation (user and system apart), peak memory and, from the host's own
//! `/metrics`, its workers' busy cores, parks per conversation and queued tasks; the share of
//! the machine's time its hypervisor stole; the host's idle memory;
//! S4's CPU per turn (all, and the last ten) and per KiB sent (the half-slope ratio is left
//! to S4's own verdict line: a median of ratios of noisy slopes says little); the idle memory
//! with no plugin and with all seven.

use std::time::Duration;

use crate::{
    client::Sample,
    idle::IdleRss,
    load::Outcome,
    long_conversation::LongRun,
    stats::{self, percentile},
    store_run::StoreRun,
};

/// One figure of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figure {
    /// What it is, with its scenario (`S2 latency p95`).
    pub(crate) name: String,
    /// Its value, in `unit`.
    pub(crate) value: f64,
    /// Its unit.
    pub(crate) unit: &'static str,
}

fn figure(name: String, value: f64, unit: &'static str) -> Figure {
    Figure { name, value, unit }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mebibytes(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The figures of S1–S3 on one host, and its idle memory.
pub(crate) fn of_store_run(run: &StoreRun) -> Vec<Figure> {
    let mut figures = vec![figure(
        "idle RSS after start (5 plugins)".to_owned(),
        mebibytes(run.idle),
        "MiB",
    )];
    for outcome in &run.outcomes {
        figures.extend(of_outcome(outcome));
    }
    if let Some(long) = &run.long {
        figures.extend(of_long(long));
    }
    figures
}

/// One load scenario's figures.
pub(crate) fn of_outcome(o: &Outcome) -> Vec<Figure> {
    let name = |what: &str| format!("{} {what}", o.scenario.name);
    let sorted = |pick: fn(&Sample) -> Duration| {
        let mut values: Vec<Duration> = o.samples.iter().map(pick).collect();
        values.sort();
        values
    };
    let (latency, first) = (sorted(|s| s.latency), sorted(|s| s.first_event));
    let n = o.samples.len() as f64;
    let mut figures = vec![figure(name("conversations/s"), o.throughput(), "/s")];
    for p in [50.0, 95.0, 99.0] {
        figures.push(figure(
            name(&format!("latency p{p}")),
            millis(percentile(&latency, p)),
            "ms",
        ));
    }
    figures.extend([
        figure(
            name("first event p50"),
            millis(percentile(&first, 50.0)),
            "ms",
        ),
        figure(
            name("longest pause p99"),
            millis(percentile(&sorted(|s| s.longest_pause), 99.0)),
            "ms",
        ),
        figure(
            name("CPU per conversation"),
            micros(o.host_cpu.total()) / n,
            "µs",
        ),
        figure(name("  of it user"), micros(o.host_cpu.user) / n, "µs"),
        figure(name("  of it system"), micros(o.host_cpu.system) / n, "µs"),
        figure(
            name("child processes' CPU per conversation"),
            micros(o.children_cpu) / n,
            "µs",
        ),
        figure(
            name("host + children CPU per conversation"),
            micros(o.host_cpu.total() + o.children_cpu) / n,
            "µs",
        ),
        figure(
            name("child processes alive at the end"),
            o.children_alive as f64,
            "",
        ),
        figure(name("peak RSS"), mebibytes(o.peak_rss), "MiB"),
        figure(name("errors"), o.errors as f64, ""),
    ]);
    if let Some(store) = o.store_cpu {
        figures.push(figure(
            name("PostgreSQL server CPU per conversation"),
            micros(store) / n,
            "µs",
        ));
    }
    // From the host's own `/metrics` (`runtime`); an older host has none.
    if let Some((p50, max)) = o.queue() {
        figures.extend([
            figure(name("runtime queue p50"), p50, "tasks"),
            figure(name("runtime queue max"), max, "tasks"),
        ]);
    }
    if let Some(stolen) = o.stolen {
        figures.push(figure(name("machine time stolen"), stolen * 100.0, "%"));
    }
    if let Some((busy, parks)) = o.busy_cores_and_parks() {
        figures.extend([
            figure(name("workers busy"), busy, "cores"),
            figure(name("worker parks per conversation"), parks, ""),
        ]);
    }
    figures
}

/// S4's figures: CPU per turn, its growth per KB sent, latency of the last turns.
pub(crate) fn of_long(run: &LongRun) -> Vec<Figure> {
    let cpu: Vec<f64> = run.turns.iter().map(|t| micros(t.cpu)).collect();
    let mut figures = vec![figure(
        "S4 CPU per turn, median".to_owned(),
        stats::median(&cpu).unwrap_or(0.0),
        "µs",
    )];
    if let Some(growth) = stats::growth(&cpu_per_kib(run)) {
        figures.push(figure(
            "S4 CPU per KiB sent (resistant line)".to_owned(),
            growth.slope,
            "µs",
        ));
    }
    let last_cpu: Vec<f64> = cpu.iter().rev().take(10).copied().collect();
    figures.push(figure(
        "S4 CPU per turn, last 10 turns median".to_owned(),
        stats::median(&last_cpu).unwrap_or(0.0),
        "µs",
    ));
    let last: Vec<f64> = run
        .turns
        .iter()
        .rev()
        .take(10)
        .map(|t| millis(t.latency))
        .collect();
    figures.push(figure(
        "S4 latency of the last 10 turns, median".to_owned(),
        stats::median(&last).unwrap_or(0.0),
        "ms",
    ));
    figures
}

/// S4's points: KiB sent upstream in a turn, and the host's CPU for it in µs.
pub(crate) fn cpu_per_kib(run: &LongRun) -> Vec<(f64, f64)> {
    run.turns
        .iter()
        .map(|t| (t.bytes_sent as f64 / 1024.0, micros(t.cpu)))
        .collect()
}

/// The idle memory of no plugin and of all seven, after first use.
pub(crate) fn of_idle(idle: &[IdleRss]) -> Vec<Figure> {
    idle.iter()
        .filter(|i| i.label == "no plugins" || i.label == "all seven")
        .flat_map(|i| {
            [
                figure(
                    format!("idle RSS after first use, {}", i.label),
                    mebibytes(i.after_first_use),
                    "MiB",
                ),
                figure(
                    format!("  of it private (RssAnon), {}", i.label),
                    mebibytes(i.anon_after_first_use),
                    "MiB",
                ),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{runtime::RuntimeUse, store::Backend};

    #[test]
    fn the_runtime_figures_come_from_the_host_s_own_account_when_it_gives_one() {
        let value = |figures: &[Figure], name: &str| {
            figures.iter().find(|f| f.name == name).map(|f| f.value)
        };
        let mut outcome = Outcome::of_s2(Backend::Sqlite, 1_000, 5_000);
        assert_eq!(value(&of_outcome(&outcome), "S2 workers busy"), None);
        assert_eq!(value(&of_outcome(&outcome), "S2 runtime queue max"), None);
        outcome.queued = vec![3.0, 900.0, 40.0, 0.0, 7.0];
        outcome.runtime = Some(RuntimeUse {
            busy: Duration::from_secs(15),
            parks: 250,
            reported_cpu: Duration::from_secs(5),
        });
        let figures = of_outcome(&outcome);
        // 15 s of busy workers in the scenario's 10 s; 250 parks over 1,000 conversations.
        assert_eq!(value(&figures, "S2 workers busy"), Some(1.5));
        assert_eq!(
            value(&figures, "S2 worker parks per conversation"),
            Some(0.25)
        );
        assert_eq!(value(&figures, "S2 runtime queue p50"), Some(7.0));
        assert_eq!(value(&figures, "S2 runtime queue max"), Some(900.0));
    }

    #[test]
    fn the_machine_s_stolen_time_is_a_figure_when_proc_stat_gave_it() {
        let stolen = |outcome: &Outcome| {
            of_outcome(outcome)
                .into_iter()
                .find(|f| f.name == "S2 machine time stolen")
                .map(|f| (f.value, f.unit))
        };
        let mut outcome = Outcome::of_s2(Backend::Sqlite, 1_000, 5_000);
        assert_eq!(stolen(&outcome), None);
        outcome.stolen = Some(0.125);
        assert_eq!(stolen(&outcome), Some((12.5, "%")));
    }
}
