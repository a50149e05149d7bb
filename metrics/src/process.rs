//! The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...), read from `/proc` at each scrape by the
//! `metrics-process` crate as Prometheus's Go client reads them, and rendered without the
//! `rojos_` prefix, so a dashboard made for any instrumented process works on a host as it is.
//! With them a fleet reads its CPU per conversation off production, docs/deploy.md
//! ("Watching a fleet").

use prometheus_client::{
    collector::Collector,
    encoding::DescriptorEncoder,
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

use super::scrape::encode_const;

/// Reads the process's figures on each scrape; a figure the system does not give is left out.
#[derive(Debug)]
pub(super) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let now = metrics_process::collector::collect();
        if let Some(seconds) = now.cpu_seconds_total {
            encode_const(
                &mut encoder,
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&Unit::Seconds),
                &ConstCounter::new(seconds),
            )?;
        }
        let gauges = [
            (
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(Unit::Bytes),
                now.resident_memory_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(Unit::Bytes),
                now.virtual_memory_bytes,
            ),
            (
                "process_virtual_memory_max",
                "Maximum amount of virtual memory available in bytes (0: unlimited)",
                Some(Unit::Bytes),
                now.virtual_memory_max_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                None,
                now.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors (0: unlimited)",
                None,
                now.max_fds,
            ),
            (
                "process_start_time",
                "Start time of the process since the Unix epoch in seconds",
                Some(Unit::Seconds),
                now.start_time_seconds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                None,
                now.threads,
            ),
        ];
        for (name, help, unit, value) in gauges {
            if let Some(value) = value {
                encode_const(
                    &mut encoder,
                    name,
                    help,
                    unit.as_ref(),
                    &ConstGauge::new(value),
                )?;
            }
        }
        Ok(())
    }
}
