//! How the report writes its figures: bytes as MiB, durations as ms or s, and a goal's
//! verdict.

use std::time::Duration;

/// Bytes as MiB.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A duration as ms, or as s from a second on.
pub(super) fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// A duration as µs, or "n/a".
pub(super) fn micros(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.0} µs", d.as_secs_f64() * 1e6),
    )
}

/// A goal's verdict: met or not.
pub(super) fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// [`verdict`] on a figure measured on the host's process (its CPU, its memory). Under
/// `$ROJOS_BENCH_WRAP` that process is the wrapper's: the host's only when the wrapper `exec`s
/// it, not when it runs it as a child (a profiler), so the figure is not judged.
pub(super) fn host_verdict(ok: bool) -> &'static str {
    if crate::host::wrapped_by().is_some() {
        "not judged: measured on $ROJOS_BENCH_WRAP's process"
    } else {
        verdict(ok)
    }
}
