//! `--store both`: each scenario on PostgreSQL beside SQLite (throughput, the host's and the
//! PostgreSQL server's CPU per conversation, latency) and the S2 goal (within 20 %).

use std::time::Duration;

use super::format::{micros, ms};
use super::percentiles::percentiles;
use crate::{load::Outcome, store::Backend, store_run::StoreRun};

/// The PostgreSQL goal: S2 on PostgreSQL keeps at least this share of SQLite's throughput.
const POSTGRES_S2_SHARE: f64 = 0.8;

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
pub(super) fn cpu_per_conversation(outcome: &Outcome) -> Option<Duration> {
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
}
