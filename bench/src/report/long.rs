//! S4's report: every fifth turn (bytes sent upstream, the host's CPU, latency, whether it
//! compacted), the bytes sent and CPU per turn over the first, middle and last tenth of the
//! turns (flat once the window is reached), what compaction turns cost more (latency, bytes
//! and tokens of the summary requests), the CPU per KiB at the start and at the end, and the
//! verdict of `stats::growth` on CPU and on latency against the bytes sent.

use std::time::Duration;

use crate::{
    figures::cpu_per_kib,
    long_conversation::{LongRun, Turn},
    stats::{self, Growth, Verdict},
};

use super::format::ms;

/// Prints S4.
pub(crate) fn long(run: &LongRun) {
    println!(
        "S4: one conversation of {} turns (a 2 KB file read, then 2 KB of text, per turn) past a window of {} tokens, requests {}, one client; host CPU per turn from {}",
        run.turns.len(),
        crate::upstream::LONG_WINDOW_TOKENS,
        if run.tokenizer {
            "counted by o200k_base (model gpt-4o)"
        } else {
            "estimated from their bytes"
        },
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
        if i % 5 == 0 || i + 1 == run.turns.len() || t.compactions > 0 {
            println!(
                "  {:>4}   {:>9.1} KiB   {:>6.0} µs   {:>7}   {:>7}{}",
                i + 1,
                t.bytes_sent as f64 / 1024.0,
                t.cpu.as_secs_f64() * 1e6,
                ms(t.latency),
                ms(t.first_event),
                if t.compactions > 0 {
                    "   compacted"
                } else {
                    ""
                }
            );
        }
    }
    deciles(&run.turns);
    compactions(run);
    if let Some(memory) = run.memory {
        println!(
            "  host memory at the end: peak RSS {:.1} MiB, private {:.1} MiB",
            memory.peak as f64 / (1024.0 * 1024.0),
            memory.anon as f64 / (1024.0 * 1024.0)
        );
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

/// The medians of bytes sent, host CPU and latency per turn over the first, middle and last
/// tenth of the turns: once the window is reached they should not grow with the turn count.
/// Turns that compacted are left out of the CPU and latency (they are reported apart).
fn deciles(turns: &[Turn]) {
    let tenth = turns.len() / 10;
    if tenth == 0 {
        return;
    }
    let mid = turns.len() / 2 - tenth / 2;
    println!("  per turn, medians        first tenth   middle tenth   last tenth");
    let row = |what: &str, unit: &str, value: &dyn Fn(&Turn) -> Option<f64>| {
        let of = |part: &[Turn]| {
            let values: Vec<f64> = part.iter().filter_map(value).collect();
            stats::median(&values).map_or("-".to_owned(), |v| format!("{v:.1} {unit}"))
        };
        println!(
            "  {what:<24} {:>11}   {:>12}   {:>10}",
            of(&turns[..tenth]),
            of(&turns[mid..mid + tenth]),
            of(&turns[turns.len() - tenth..])
        );
    };
    row("sent upstream", "KiB", &|t| {
        Some((t.bytes_sent - t.summary_bytes) as f64 / 1024.0)
    });
    let plain = |t: &Turn, d: Duration| (t.compactions == 0).then_some(d.as_secs_f64() * 1e3);
    row("host CPU", "ms", &|t| plain(t, t.cpu));
    row("latency", "ms", &|t| plain(t, t.latency));
}

/// What the turns that compacted cost over the others: their latency, and the requests for
/// a summary (bytes, and tokens at four bytes a token as the window is counted here).
fn compactions(run: &LongRun) {
    let compacted: Vec<&Turn> = run.turns.iter().filter(|t| t.compactions > 0).collect();
    println!(
        "  requests over the window: {}; turns that compacted: {} of {}",
        run.over_window,
        compacted.len(),
        run.turns.len()
    );
    if compacted.is_empty() {
        return;
    }
    let millis = |turns: &[&Turn], d: fn(&Turn) -> Duration| {
        let values: Vec<f64> = turns.iter().map(|t| d(t).as_secs_f64() * 1e3).collect();
        stats::median(&values).unwrap_or(0.0)
    };
    let after: Vec<&Turn> = run
        .turns
        .iter()
        .skip_while(|t| t.compactions == 0)
        .filter(|t| t.compactions == 0)
        .collect();
    let summary: Vec<f64> = compacted.iter().map(|t| t.summary_bytes as f64).collect();
    let summary = stats::median(&summary).unwrap_or(0.0);
    println!(
        "  a compaction turn, medians: latency {:.1} ms (other turns after the first compaction {:.1} ms), host CPU {:.2} ms ({:.2} ms), summary requests {:.1} KiB ≈ {:.0} tokens more",
        millis(&compacted, |t| t.latency),
        millis(&after, |t| t.latency),
        millis(&compacted, |t| t.cpu),
        millis(&after, |t| t.cpu),
        summary / 1024.0,
        summary / 4.0
    );
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
