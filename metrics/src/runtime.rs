//! The server's tokio runtime, read at each scrape from the runtime the scrape runs on: its
//! workers, how long they were busy, how often they went to sleep for lack of work, and its
//! tasks. Busy time is wall-clock time with a task to run (it counts time a busy machine kept a
//! worker off a core): near the number of workers, the runtime is saturated and tasks queue.
//! Parks per chat tell whether a host idles between chats, where `[server] worker_threads = 1`
//! saves CPU (docs/configuration.md, "Worker threads").

use prometheus_client::{
    collector::Collector,
    encoding::DescriptorEncoder,
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

use super::scrape::encode_const;

/// Reads the current runtime's figures on each scrape; rendered off a runtime, only
/// `runtime_workers 0`.
#[derive(Debug)]
pub(super) struct RuntimeCollector;

impl Collector for RuntimeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .map(|h| h.metrics());
        let workers = runtime.as_ref().map_or(0, |r| r.num_workers());
        encode_const(
            &mut encoder,
            "runtime_workers",
            "Worker threads of the server's runtime (`[server] worker_threads`, else one per core)",
            None,
            &ConstGauge::new(workers),
        )?;
        let Some(runtime) = runtime else {
            return Ok(());
        };
        let busy: f64 = (0..workers)
            .map(|w| runtime.worker_total_busy_duration(w).as_secs_f64())
            .sum();
        encode_const(
            &mut encoder,
            "runtime_busy",
            "Time the runtime's workers spent running tasks, summed over the workers",
            Some(&Unit::Seconds),
            &ConstCounter::new(busy),
        )?;
        let parks: u64 = (0..workers).map(|w| runtime.worker_park_count(w)).sum();
        encode_const(
            &mut encoder,
            "runtime_worker_parks",
            "Times a worker went to sleep with no task to run (each followed by a wake)",
            None,
            &ConstCounter::new(parks),
        )?;
        for (name, help, value) in [
            (
                "runtime_alive_tasks",
                "Tasks alive in the runtime (connections, chat runs, ...)",
                runtime.num_alive_tasks(),
            ),
            (
                "runtime_global_queue_depth",
                "Tasks waiting in the runtime's shared queue for a worker",
                runtime.global_queue_depth(),
            ),
        ] {
            encode_const(&mut encoder, name, help, None, &ConstGauge::new(value))?;
        }
        Ok(())
    }
}
