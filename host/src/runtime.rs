//! The tokio runtime the server runs on: tokio's multi-thread scheduler with one change. A
//! task woken from a thread that is not one of the runtime's workers (a tool call's blocking
//! thread when the plugin returns, the SQLite writer when a write is committed) waits in
//! tokio's shared queue, which a busy worker looks at only every `global_queue_interval`
//! tasks (tokio tunes it to 2–127, and takes a batch that then waits behind the worker's own
//! queue). Under `rojos-bench` S3 (1,000 streams), a run waited 20 ms on average there after
//! its tool call's thread had finished, 42 % of calls more than 10 ms (bench/PROFILE.md,
//! eighth round). Those wakes are the end of a step's real work, while a stream's chunks are
//! woken by the worker that polls the network, into its own queue.
//!
//! So a worker looks at the shared queue every other task: a task woken from another thread
//! waits behind at most a few of the worker's own, and the worker's own queue still gets every
//! other turn. Looking there on every task (the eighth round's setting) starved the worker's
//! own queue whenever the shared queue did not empty (a full queue hands tasks over to it
//! too): under S3 on a saturated machine, 4–8 % of the conversations paused for over a
//! second, up to 15 s, until the load ended (bench/PROFILE.md, eleventh round).
//!
//! The number of workers is one per core unless `[server] worker_threads` says otherwise
//! (docs/configuration.md). Each worker that is idle is woken when another queues a task it
//! could take, and goes back to sleep when there is none: with one chat at a time on two
//! cores, a single worker cost 15–22 % less CPU per conversation, and with 32 chats at once it
//! served 7–14 % fewer of them (bench/PROFILE.md, twelfth round).

use std::{io, num::NonZeroUsize};

use tokio::runtime::{Builder, Runtime};

/// How many tasks a worker runs between looks at the shared queue: every other one.
const SHARED_QUEUE_INTERVAL: u32 = 2;

/// The runtime `rojos serve` and `rojos mcp` run on, with `worker_threads` workers (`None`:
/// one per core).
///
/// # Errors
///
/// The runtime's threads or its I/O driver cannot be made.
pub fn runtime(worker_threads: Option<NonZeroUsize>) -> io::Result<Runtime> {
    let mut builder = builder();
    if let Some(workers) = worker_threads {
        builder.worker_threads(workers.get());
    }
    builder.build()
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
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    };

    use super::*;

    #[test]
    fn the_runtime_has_the_configured_number_of_workers() {
        for workers in [1, 3] {
            let runtime = runtime(NonZeroUsize::new(workers)).expect("runtime");
            assert_eq!(runtime.metrics().num_workers(), workers);
        }
        // Unset, tokio's own default: one per core (or `TOKIO_WORKER_THREADS`).
        let tokios = Builder::new_multi_thread().build().expect("runtime");
        assert_eq!(
            runtime(None).expect("runtime").metrics().num_workers(),
            tokios.metrics().num_workers()
        );
    }

    /// Tokens going round the ring: the tasks queued on its worker at any time.
    const TOKENS: usize = 64;

    /// Tasks passing tokens round a ring keep one worker's own queue never empty; a task
    /// woken from another thread then runs after how many of their steps? One of the ring's
    /// steps tells a waiting thread to wake the task and waits until it has (both spinning,
    /// so the step stays as short as the others, as tokio's default tunes itself by how long
    /// its tasks take): the woken task is in the shared queue before the ring takes another
    /// step, so the count is the scheduler's, whatever else the machine is doing.
    fn steps_before_a_woken_task_runs(mut builder: Builder) -> usize {
        const RING: usize = 256;
        /// The step that has the task woken: the ring well under way.
        const WAKING_STEP: usize = 20_000;
        /// The step that gets the waking thread spinning, ready.
        const READY_STEP: usize = WAKING_STEP - 500;
        let runtime = builder.worker_threads(1).build().expect("runtime");
        let steps = Arc::new(AtomicUsize::new(0));
        let steps_at_wake = Arc::new(AtomicUsize::new(0));
        let (go, sent) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (wake, woken) = tokio::sync::oneshot::channel::<()>();
        let waker = {
            let (go, sent) = (Arc::clone(&go), Arc::clone(&sent));
            std::thread::spawn(move || {
                std::thread::park(); // until the ring is near the waking step
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                wake.send(()).expect("the task waits");
                sent.store(true, Ordering::Release);
            })
        };
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..RING)
            .map(|_| tokio::sync::mpsc::unbounded_channel::<()>())
            .unzip();
        for (i, mut receiver) in receivers.into_iter().enumerate() {
            let next = senders[(i + 1) % RING].clone();
            let (steps, steps_at_wake) = (Arc::clone(&steps), Arc::clone(&steps_at_wake));
            let (go, sent) = (Arc::clone(&go), Arc::clone(&sent));
            let waker = waker.thread().clone();
            runtime.spawn(async move {
                while receiver.recv().await.is_some() {
                    let step = steps.fetch_add(1, Ordering::Relaxed) + 1;
                    if step == READY_STEP {
                        waker.unpark();
                    }
                    if step == WAKING_STEP {
                        go.store(true, Ordering::Release);
                        while !sent.load(Ordering::Acquire) {
                            std::hint::spin_loop();
                        }
                        steps_at_wake.store(step, Ordering::Relaxed);
                    }
                    if next.send(()).is_err() {
                        return;
                    }
                }
            });
        }
        for sender in senders.iter().take(TOKENS) {
            sender.send(()).expect("the ring runs");
        }
        let steps_seen = Arc::clone(&steps);
        let ran = runtime.spawn(async move {
            woken.await.expect("sent");
            steps_seen.load(Ordering::Relaxed) - steps_at_wake.load(Ordering::Relaxed)
        });
        let between = runtime.block_on(ran).expect("the woken task ran");
        waker.join().expect("the waking thread");
        drop(senders);
        runtime.shutdown_background();
        between
    }

    /// The median of nine [`steps_before_a_woken_task_runs`] with `settings` (where the wake
    /// falls in the worker's round of looks at the shared queue differs from one to the next).
    fn median_steps(settings: fn() -> Builder) -> usize {
        let mut steps: Vec<usize> = (0..9)
            .map(|_| steps_before_a_woken_task_runs(settings()))
            .collect();
        steps.sort_unstable();
        steps[4]
    }

    /// How many tasks waiting in the shared queue run before a task in the worker's own
    /// queue: [`SHARED`] tasks are woken from another thread, all at once, while the worker
    /// is busy with a task that has just queued one of its own (as a stream's chunk is
    /// queued by the worker that polls the network). They are all in the shared queue
    /// before the worker takes another task, so the count is the scheduler's alone.
    fn shared_tasks_run_before_a_queued_one(mut builder: Builder) -> usize {
        let runtime = builder.worker_threads(1).build().expect("runtime");
        let (waiting, ran) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (wakes, receivers): (Vec<_>, Vec<_>) = (0..SHARED)
            .map(|_| tokio::sync::oneshot::channel::<()>())
            .unzip();
        let shared: Vec<_> = receivers
            .into_iter()
            .map(|woken| {
                let (waiting, ran) = (Arc::clone(&waiting), Arc::clone(&ran));
                runtime.spawn(async move {
                    waiting.fetch_add(1, Ordering::Relaxed);
                    woken.await.expect("sent");
                    ran.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        // Every one waits, none is still queued on the worker.
        while waiting.load(Ordering::Relaxed) < SHARED {
            std::thread::yield_now();
        }
        let (go, sent) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let waker = {
            let (go, sent) = (Arc::clone(&go), Arc::clone(&sent));
            std::thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                for wake in wakes {
                    wake.send(()).expect("the task waits");
                }
                sent.store(true, Ordering::Release);
            })
        };
        let (report, before) = std::sync::mpsc::channel();
        let busy = {
            let ran = Arc::clone(&ran);
            runtime.spawn(async move {
                drop(tokio::spawn(async move {
                    report.send(ran.load(Ordering::Relaxed)).expect("reported");
                }));
                // Takes the worker's slot for the next task, so the one above waits in its
                // queue.
                drop(tokio::spawn(async {}));
                go.store(true, Ordering::Release);
                while !sent.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            })
        };
        runtime.block_on(busy).expect("the busy task ran");
        let before = before.recv().expect("the queued task ran");
        for task in shared {
            runtime.block_on(task).expect("a woken task ran");
        }
        waker.join().expect("the waking thread");
        runtime.shutdown_background();
        before
    }

    /// Tasks woken at once from another thread in [`shared_tasks_run_before_a_queued_one`].
    const SHARED: usize = 2_000;

    #[test]
    fn a_task_in_the_workers_own_queue_is_not_starved_by_tasks_woken_from_other_threads() {
        let ours = shared_tasks_run_before_a_queued_one(builder());
        assert!(
            ours < SHARED_QUEUE_INTERVAL as usize,
            "{ours} tasks woken from another thread ran before one in the worker's own queue"
        );
        // Looking at the shared queue first on every task (the eighth round's setting), the
        // worker's own queue waits until the shared queue is empty: under a load that keeps
        // it filled, for as long as the load lasts (S3: streams paused for up to 15 s).
        let every_time = shared_tasks_run_before_a_queued_one({
            let mut every_time = Builder::new_multi_thread();
            every_time.enable_all().global_queue_interval(1);
            every_time
        });
        assert_eq!(
            every_time, SHARED,
            "looking at the shared queue on every task, the queued task ran before it was empty"
        );
    }

    #[test]
    fn a_task_woken_from_another_thread_runs_before_the_busy_workers_own_queue() {
        // Within a few rounds of the worker's own queue: the ring's tokens each take at most
        // three more steps (this machine: one round, 64 steps, in most runs; at most 192 in
        // 600 runs, idle or with three busy loops on the two cores).
        let ours = median_steps(builder);
        assert!(
            ours <= 3 * TOKENS,
            "a task woken from another thread ran after {ours} ring steps, more than three \
             rounds of the worker's {TOKENS} queued tasks"
        );
        // Where the worker looks at the shared queue every 127 tasks, as tokio's default does
        // when its tasks are short (the default is not compared with as such: it tunes itself
        // by how long its tasks take, so on a busy machine, or in a debug build, it comes
        // close to ours): the woken task waits for dozens of rounds (this machine: 2,240–3,264
        // steps).
        let every_127 = median_steps(|| {
            let mut default = Builder::new_multi_thread();
            default.enable_all().global_queue_interval(127);
            default
        });
        assert!(
            every_127 >= 10 * TOKENS,
            "looking at the shared queue every 127 tasks, a woken task ran after {every_127} \
             ring steps: this test cannot tell that from looking every time"
        );
    }
}
