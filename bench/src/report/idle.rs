//! The idle memory report: each configuration's RSS after start and after first use, what
//! each plugin costs over the host without plugins, and the idle-memory goal.

use crate::idle::IdleRss;

use super::format::{host_verdict, mib};

/// The performance goal: idle RSS with the seven built-in plugins loaded.
const IDLE_WITH_ALL_SEVEN: u64 = 20 << 20;

/// Prints the idle memory table.
pub(crate) fn idle(rows: &[IdleRss], rounds: usize) {
    println!(
        "idle RSS: fresh hosts, medians of {rounds} round(s); \"after first use\" is 300 ms after one chat calling every loaded tool once (the figure to quote)"
    );
    let none = rows.iter().find(|r| r.label == "no plugins");
    let cost = |now: u64, pick: fn(&IdleRss) -> u64| {
        let cost = now as i64 - none.map_or(0, pick) as i64;
        format!(
            "{}{}",
            if cost < 0 { "−" } else { "+" },
            mib(cost.unsigned_abs())
        )
    };
    println!("| plugins loaded | RSS after start | RSS after first use | its cost over no plugins | private (RssAnon) after start / after first use | its cost after first use |");
    println!("|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} / {} | {} |",
            row.label,
            mib(row.after_start),
            mib(row.after_first_use),
            cost(row.after_first_use, |r| r.after_first_use),
            mib(row.anon_after_start),
            mib(row.anon_after_first_use),
            cost(row.anon_after_first_use, |r| r.anon_after_first_use)
        );
        if let Some(problem) = &row.problem {
            println!("    problem: {problem}");
        }
    }
    if let Some(all) = rows.iter().find(|r| r.label == "all seven") {
        println!(
            "goal idle: RSS with the seven built-in plugins ≤ {}: {} — {}",
            mib(IDLE_WITH_ALL_SEVEN),
            mib(all.after_first_use),
            host_verdict(all.after_first_use <= IDLE_WITH_ALL_SEVEN)
        );
    }
}
