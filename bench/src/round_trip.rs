//! What a process boundary costs on this machine: a bare round trip of a call-sized message
//! through another process (`cat`, over two pipes) that does nothing else, each side blocked
//! in `read` until the other writes, as a changing call's thread waits on a worker's lane.
//! Both the wall time and the CPU both processes spend (their threads' `schedstat`, in
//! nanoseconds) are reported: on a machine whose other CPU is idle, most of it is waking that
//! CPU. A call that waits on the runtime instead (a warm call in a worker) can cost less,
//! when the runtime's thread is still awake as the answer comes.

use std::{
    io::{Read, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context;

use crate::threads;

/// The size of the message each way: about a call's frame.
const BYTES: usize = 200;
/// Round trips per batch, and batches (the wall time is the median batch's).
const BATCH: usize = 200;
const BATCHES: usize = 25;

/// What one round trip costs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoundTrip {
    /// The wall time, median over the batches.
    pub(crate) wall: Duration,
    /// The CPU this thread and the other process spent, over all the round trips; `None`
    /// where the kernel keeps no `schedstat`.
    pub(crate) cpu: Option<Duration>,
}

/// Measures [`RoundTrip`] against a `cat` started for it.
pub(crate) fn measure() -> anyhow::Result<RoundTrip> {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start cat for the round trip")?;
    let measured = trips(&mut cat);
    drop(cat.stdin.take());
    let _ = cat.wait();
    measured
}

fn trips(cat: &mut std::process::Child) -> anyhow::Result<RoundTrip> {
    let pid = cat.id();
    let (Some(to), Some(from)) = (cat.stdin.as_mut(), cat.stdout.as_mut()) else {
        anyhow::bail!("cat has no pipes");
    };
    let message = [b'x'; BYTES];
    let mut back = [0u8; BYTES];
    let mut trip = || -> anyhow::Result<()> {
        to.write_all(&message)?;
        from.read_exact(&mut back)?;
        Ok(())
    };
    trip().context("cat does not echo")?;
    let cpu_before = cpu(pid);
    let mut walls = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let started = Instant::now();
        for _ in 0..BATCH {
            trip()?;
        }
        walls.push(started.elapsed() / BATCH as u32);
    }
    let cpu_after = cpu(pid);
    walls.sort();
    let trips = (BATCH * BATCHES) as u32;
    Ok(RoundTrip {
        wall: walls[BATCHES / 2],
        cpu: cpu_before
            .zip(cpu_after)
            .map(|(before, after)| after.saturating_sub(before) / trips),
    })
}

/// The CPU this thread and process `other` have used so far.
fn cpu(other: u32) -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mine = text.split_whitespace().next()?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(mine) + threads::on_cpu(other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_takes_time_and_both_processes_cpu() {
        let trip = measure().expect("cat is on every machine the bench runs on");
        assert!(trip.wall > Duration::ZERO);
        // Two system calls on each side at the least: far above nothing, far below 10 ms.
        let cpu = trip.cpu.expect("this kernel keeps schedstat");
        assert!(
            cpu > Duration::from_nanos(500) && cpu < Duration::from_millis(10),
            "{cpu:?}"
        );
    }
}
