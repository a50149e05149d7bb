//! Watching the host while a scenario runs: its resident memory sampled every 10 ms (and its
//! `VmHWM` reset at the start and read at the end), `GET /healthz` probed from a task of
//! its own, each probe bounded by a timeout so a host that stops answering is reported, not
//! waited for, and its runtime's queued tasks read from its `/metrics` every half second.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::host::HostProcess;

/// How `/healthz` is probed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probing {
    /// The pause after each probe.
    pub(crate) every: Duration,
    /// Open a new connection for every probe instead of reusing a kept-alive one.
    pub(crate) fresh_connections: bool,
}

/// A probe that has no answer within this is counted as failed.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// `/healthz` latencies of the probes answered `200`, and the number of failed probes.
pub(crate) type Healthz = (Vec<Duration>, u64);

/// What a watch saw.
#[derive(Debug)]
pub(crate) struct Watched {
    /// The host's peak resident memory during the watch, in bytes.
    pub(crate) peak_rss: u64,
    /// The `/healthz` probes.
    pub(crate) healthz: Healthz,
    /// The tasks waiting in the host's runtime's shared queue, read every
    /// [`QUEUE_READ_EVERY`] (none from a host without the metric).
    pub(crate) queued: Vec<f64>,
}

/// How often the runtime's queue is read: often enough to see a saturated host's queue, at a
/// scrape's cost (0.2 ms of the host's CPU) twice a second.
pub(crate) const QUEUE_READ_EVERY: Duration = Duration::from_millis(500);

/// A running watch; [`Watch::finish`] stops it.
#[derive(Debug)]
pub(crate) struct Watch {
    stop: Arc<AtomicBool>,
    sampled_peak: Arc<AtomicU64>,
    peak_reset: bool,
    sampler: tokio::task::JoinHandle<()>,
    prober: tokio::task::JoinHandle<Healthz>,
    queue_reader: tokio::task::JoinHandle<Vec<f64>>,
}

impl Watch {
    /// Resets the host's `VmHWM` and starts sampling and probing.
    pub(crate) fn start(host: &HostProcess, probing: Probing) -> Watch {
        let peak_reset = host.reset_peak();
        let stop = Arc::new(AtomicBool::new(false));
        let sampled_peak = Arc::new(AtomicU64::new(0));
        let sampler = spawn_rss_sampler(host, Arc::clone(&stop), Arc::clone(&sampled_peak));
        let prober = spawn_healthz_prober(&host.url, probing, Arc::clone(&stop));
        let queue_reader = spawn_queue_reader(&host.url, Arc::clone(&stop));
        Watch {
            stop,
            sampled_peak,
            peak_reset,
            sampler,
            prober,
            queue_reader,
        }
    }

    /// Stops sampling and probing; the peak is the higher of `VmHWM` (when it could be reset)
    /// and the highest sample.
    pub(crate) async fn finish(self, host: &HostProcess) -> Watched {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sampler.await;
        let healthz = self.prober.await.unwrap_or_default();
        let queued = self.queue_reader.await.unwrap_or_default();
        let hwm = if self.peak_reset {
            host.memory().map(|m| m.peak).unwrap_or(0)
        } else {
            0
        };
        Watched {
            peak_rss: hwm.max(self.sampled_peak.load(Ordering::Relaxed)),
            healthz,
            queued,
        }
    }
}

fn spawn_rss_sampler(
    host: &HostProcess,
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let path = format!("/proc/{}/status", host.pid());
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            if let Ok(status) = tokio::fs::read_to_string(&path).await {
                let rss = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .map_or(0, |kib| kib * 1024);
                peak.fetch_max(rss, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// Probes `GET /healthz` until `stop`.
fn spawn_healthz_prober(
    url: &str,
    probing: Probing,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Healthz> {
    let url = format!("{url}/healthz");
    tokio::spawn(async move {
        let mut builder = reqwest::Client::builder().timeout(PROBE_TIMEOUT);
        if probing.fresh_connections {
            builder = builder.pool_max_idle_per_host(0);
        }
        let Ok(http) = builder.build() else {
            return (Vec::new(), 0);
        };
        let mut times = Vec::new();
        let mut failed = 0;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let ok = match http.get(&url).send().await {
                Ok(r) => r.status() == 200 && r.text().await.is_ok(),
                Err(_) => false,
            };
            if ok {
                times.push(started.elapsed());
            } else {
                failed += 1;
            }
            tokio::time::sleep(probing.every).await;
        }
        (times, failed)
    })
}

/// Reads the host's runtime queue every [`QUEUE_READ_EVERY`] until `stop`.
fn spawn_queue_reader(url: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<f64>> {
    let url = url.to_owned();
    tokio::spawn(async move {
        let Ok(http) = reqwest::Client::builder().timeout(PROBE_TIMEOUT).build() else {
            return Vec::new();
        };
        let mut queued = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            queued.extend(crate::runtime::queued_tasks(&http, &url).await);
            tokio::time::sleep(QUEUE_READ_EVERY).await;
        }
        queued
    })
}
