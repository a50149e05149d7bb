//! S4's report: every fifth turn (bytes sent upstream, the host's CPU, latency), the CPU per
//! KiB at the start and at the end, and the verdict of `stats::growth` on CPU and on latency
//! against the bytes sent.

use crate::{
    figures::cpu_per_kib,
    long_conversation::LongRun,
    stats::{self, Growth, Verdict},
};

use super::ms;

/// Prints S4.
pub(crate) fn long(run: &LongRun) {
    println!(
        "S4: one conversation of {} turns (a 2 KB file read, then 2 KB of text, per turn), one client; host CPU per turn from {}",
        run.turns.len(),
        if run.precise_cpu {
            "the threads' schedstat (ns)"
        } else {
            "/proc stat clock ticks (coarse: no schedstat here)"
        }
    );
    if let Some(failure) = &run.failure {
        println!("  STOPPED EARLY: {failure}");
    }
    println!("  turn   sent upstream   host CPU   latency   first event");
    for (i, t) in run.turns.iter().enumerate() {
        if i % 5 == 0 || i + 1 == run.turns.len() {
            println!(
                "  {:>4}   {:>9.1} KiB   {:>6.0} µs   {:>7}   {:>7}",
                i + 1,
                t.bytes_sent as f64 / 1024.0,
                t.cpu.as_secs_f64() * 1e6,
                ms(t.latency),
                ms(t.first_event)
            );
        }
    }
    let total: u64 = run.turns.iter().map(|t| t.bytes_sent).sum();
    println!(
        "  sent upstream in all: {:.1} MiB; the last turn's two requests {:.0} KiB",
        total as f64 / (1024.0 * 1024.0),
        run.turns
            .last()
            .map_or(0.0, |t| t.bytes_sent as f64 / 1024.0)
    );
    let points = cpu_per_kib(run);
    per_kib_at_ends(&points);
    let latency: Vec<(f64, f64)> = run
        .turns
        .iter()
        .map(|t| (t.bytes_sent as f64 / 1024.0, t.latency.as_secs_f64() * 1e3))
        .collect();
    verdict("CPU", "µs", stats::growth(&points));
    verdict("latency", "ms", stats::growth(&latency));
}

/// CPU per KiB sent over the first and the last ten turns (fixed costs weigh more at the
/// start, so this falls along a linear cost; the verdict reads the slopes instead).
fn per_kib_at_ends(points: &[(f64, f64)]) {
    let per_kib = |part: &[(f64, f64)]| {
        let values: Vec<f64> = part.iter().map(|(kib, cpu)| cpu / kib).collect();
        stats::median(&values)
    };
    let ends = points.len().min(10);
    if let (Some(start), Some(end)) = (
        per_kib(&points[..ends]),
        per_kib(&points[points.len() - ends..]),
    ) {
        println!(
            "  CPU per KiB sent  first {ends} turns {start:.1} µs, last {ends} {end:.1} µs (fixed costs make the first higher)"
        );
    }
}

fn verdict(what: &str, unit: &str, growth: Option<Growth>) {
    let Some(g) = growth else {
        println!("  {what}: too few turns for a verdict");
        return;
    };
    let reading = match g.verdict {
        Verdict::Flat => "FLAT: it does not grow measurably with the bytes sent",
        Verdict::Linear => "LINEAR in the bytes sent",
        Verdict::Superlinear => "SUPERLINEAR: it grows faster than the bytes sent (quadratic?)",
    };
    println!(
        "  verdict {what}: {reading} — {:.2} {unit}/KiB + {:.0} {unit} per turn (resistant line), half-slope ratio {:.2} (1 = straight), quadratic share of the last turn's cost {:.0} % (at least {:.0} % in 90 % of resamples; SUPERLINEAR above {:.0} %), rise first→last third {:+.0} %",
        g.slope,
        g.intercept,
        g.half_slope_ratio,
        g.quadratic_share * 100.0,
        g.quadratic_share_low * 100.0,
        stats::SUPERLINEAR_SHARE * 100.0,
        g.rise * 100.0
    );
}
