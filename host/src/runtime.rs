//! The tokio runtime the server runs on: tokio's multi-thread scheduler with one change. A
//! task woken from a thread that is not one of the runtime's workers (a tool call's blocking
//! thread when the plugin returns, the SQLite writer when a write is committed) waits in
//! tokio's shared queue, which a busy worker looks at only every `global_queue_interval`
//! tasks (tokio tunes it to 2–127, and takes a batch that then waits behind the worker's own
//! queue). Under `rojos-bench` S3 (1,000 streams), a run waited 20 ms on average there after
//! its tool call's thread had finished, 42 % of calls more than 10 ms; with the shared queue
//! looked at first on every task, 3 ms (bench/PROFILE.md, eighth round). Those wakes are the
//! end of a step's real work, while a stream's chunks are woken by the worker that polls the
//! network, into its own queue; so they go first.

use std::io;

use tokio::runtime::{Builder, Runtime};

/// How many tasks a worker runs between looks at the shared queue: every one.
const SHARED_QUEUE_INTERVAL: u32 = 1;

/// The runtime `rojos serve` and `rojos mcp` run on.
///
/// # Errors
///
/// The runtime's threads or its I/O driver cannot be made.
pub fn runtime() -> io::Result<Runtime> {
    builder().build()
}

/// The runtime's settings, before [`Builder::build`].
fn builder() -> Builder {
    let mut builder = Builder::new_multi_thread();
    builder
        .enable_all()
        .global_queue_interval(SHARED_QUEUE_INTERVAL);
    builder
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    use super::*;

    /// Tasks passing tokens round a ring keep one worker's own queue never empty; a task
    /// woken from another thread then runs after how many of their steps?
    fn steps_before_a_woken_task_runs(mut builder: Builder) -> usize {
        const RING: usize = 256;
        const TOKENS: usize = 64;
        let runtime = builder.worker_threads(1).build().expect("runtime");
        let steps = Arc::new(AtomicUsize::new(0));
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..RING)
            .map(|_| tokio::sync::mpsc::unbounded_channel::<()>())
            .unzip();
        for (i, mut receiver) in receivers.into_iter().enumerate() {
            let next = senders[(i + 1) % RING].clone();
            let steps = Arc::clone(&steps);
            runtime.spawn(async move {
                while receiver.recv().await.is_some() {
                    steps.fetch_add(1, Ordering::Relaxed);
                    if next.send(()).is_err() {
                        return;
                    }
                }
            });
        }
        for sender in senders.iter().take(TOKENS) {
            sender.send(()).expect("the ring runs");
        }
        let (wake, woken) = tokio::sync::oneshot::channel::<usize>();
        let steps_seen = Arc::clone(&steps);
        let ran = runtime.spawn(async move {
            let sent_at = woken.await.expect("sent");
            steps_seen.load(Ordering::Relaxed) - sent_at
        });
        // Until the ring is well under way, then from a thread outside the runtime.
        while steps.load(Ordering::Relaxed) < 100_000 {
            std::thread::yield_now();
        }
        let steps_at_wake = Arc::clone(&steps);
        std::thread::spawn(move || wake.send(steps_at_wake.load(Ordering::Relaxed)))
            .join()
            .expect("the waking thread")
            .expect("the task waits");
        let between = runtime.block_on(ran).expect("the woken task ran");
        drop(senders);
        runtime.shutdown_background();
        between
    }

    /// The median of nine [`steps_before_a_woken_task_runs`] with `settings` (one trial
    /// can be far off either way: the waking thread descheduled between its count and its
    /// wake, or the worker's own queue empty just then).
    fn median_steps(settings: fn() -> Builder) -> usize {
        let mut steps: Vec<usize> = (0..9)
            .map(|_| steps_before_a_woken_task_runs(settings()))
            .collect();
        steps.sort_unstable();
        steps[4]
    }

    #[test]
    fn a_task_woken_from_another_thread_runs_before_the_busy_workers_own_queue() {
        let ours = median_steps(builder);
        let tokio_default = median_steps(|| {
            let mut default = Builder::new_multi_thread();
            default.enable_all();
            default
        });
        // Counted in steps, not time, and against tokio's default on the same machine (this
        // machine: medians of 40–200 steps against 670–1,700).
        assert!(
            ours * 3 <= tokio_default,
            "a task woken from another thread ran after {ours} ring steps; with tokio's \
             default, {tokio_default}"
        );
    }
}
