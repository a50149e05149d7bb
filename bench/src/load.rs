//! One load scenario: `clients` concurrent clients, each running the reference conversation back
//! to back in its own project until the deadline, while the host's memory is sampled and
//! `/healthz` probed (`watch`). Afterwards the files written are checked
//! in a sample of projects, and a few stored conversations are read back.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{
    client::{self, Sample},
    host::{HostProcess, TOKEN},
    procfs::{CpuTimes, MachineTime},
    runtime::{self, RuntimeUse},
    store::{Backend, Store},
    threads::{self, ThreadStates},
    upstream::{self, Pace, Upstream, FILE, PAGE},
    watch::{Healthz, Probing, Watch, Watched},
};

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// `S1`, `S2`, `S3`.
    pub(crate) name: &'static str,
    /// The host's conversation store.
    pub(crate) store: Backend,
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// Clients start new conversations until this long after the start.
    pub(crate) duration: Duration,
    /// The upstream's pace.
    pub(crate) pace: Pace,
    /// Sample the host's thread states while it runs (`threads`).
    pub(crate) sample_threads: bool,
}

/// What a scenario measured.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The scenario.
    pub(crate) scenario: Scenario,
    /// Every conversation that streamed as it should.
    pub(crate) samples: Vec<Sample>,
    /// Failed conversations and failed checks.
    pub(crate) errors: u64,
    /// The first few failures, for the report.
    pub(crate) error_texts: Vec<String>,
    /// From the first request to the last body's end.
    pub(crate) elapsed: Duration,
    /// The host's peak resident memory during the scenario, in bytes.
    pub(crate) peak_rss: u64,
    /// CPU time the host used during the scenario.
    pub(crate) host_cpu: CpuTimes,
    /// CPU time the host's child processes (its plugin zygote and workers) used during the
    /// scenario, ended ones included; zero when it has none.
    pub(crate) children_cpu: Duration,
    /// The host's child processes alive at the scenario's end.
    pub(crate) children_alive: usize,
    /// CPU time the PostgreSQL server used during the scenario (none with SQLite).
    pub(crate) store_cpu: Option<Duration>,
    /// CPU time the bench process (clients and upstream) used during the scenario.
    pub(crate) bench_cpu: Duration,
    /// The upstream's own time for one conversation (3 turns, measured directly).
    pub(crate) upstream_alone: Duration,
    /// How late the upstream sent each paced turn's last chunk during the scenario (empty
    /// when unpaced): the bench starved by the machine it shares with the host.
    pub(crate) upstream_late: Vec<Duration>,
    /// `/healthz` latencies sampled during the scenario, and failed probes.
    pub(crate) healthz: Healthz,
    /// Where the host's threads were, when sampled.
    pub(crate) threads: Option<ThreadStates>,
    /// The host's own account of its runtime and CPU (`runtime`), when it gives one.
    pub(crate) runtime: Option<RuntimeUse>,
    /// The tasks waiting in its runtime's shared queue, read during the scenario (`watch`).
    pub(crate) queued: Vec<f64>,
    /// The share of the machine's CPU time its hypervisor gave to other guests during the
    /// scenario (`None` where `/proc/stat` does not say): a virtual machine's slow spells.
    pub(crate) stolen: Option<f64>,
}

impl Outcome {
    /// For tests: an S2 outcome of `conversations` in 10 s using `cpu_ms` of host CPU.
    #[cfg(test)]
    pub(crate) fn of_s2(store: Backend, conversations: usize, cpu_ms: u64) -> Outcome {
        let sample = crate::client::Sample {
            latency: Duration::from_millis(100),
            first_event: Duration::from_millis(1),
            longest_pause: Duration::from_millis(1),
            conversation: "c".to_owned(),
        };
        Outcome {
            scenario: Scenario {
                name: "S2",
                store,
                clients: 32,
                duration: Duration::from_secs(10),
                pace: crate::upstream::Pace::FAST,
                sample_threads: false,
            },
            samples: vec![sample; conversations],
            errors: 0,
            error_texts: Vec::new(),
            elapsed: Duration::from_secs(10),
            peak_rss: 0,
            host_cpu: crate::procfs::CpuTimes {
                user: Duration::from_millis(cpu_ms),
                system: Duration::ZERO,
            },
            children_cpu: Duration::ZERO,
            children_alive: 0,
            store_cpu: None,
            bench_cpu: Duration::ZERO,
            upstream_alone: Duration::ZERO,
            upstream_late: Vec::new(),
            healthz: (Vec::new(), 0),
            threads: None,
            runtime: None,
            queued: Vec::new(),
            stolen: None,
        }
    }

    /// Conversations completed per second.
    pub(crate) fn throughput(&self) -> f64 {
        self.samples.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The cores the host's workers were busy on average, and their parks per conversation,
    /// when the host gave its account (`runtime`).
    pub(crate) fn busy_cores_and_parks(&self) -> Option<(f64, f64)> {
        let runtime = self.runtime?;
        Some((
            runtime.busy.as_secs_f64() / self.elapsed.as_secs_f64(),
            runtime.parks as f64 / self.samples.len() as f64,
        ))
    }

    /// The median and the largest of the runtime queue's readings, if there were any.
    pub(crate) fn queue(&self) -> Option<(f64, f64)> {
        let max = self.queued.iter().copied().reduce(f64::max)?;
        Some((crate::stats::median(&self.queued)?, max))
    }
}

/// Runs `scenario` against `host`, which uses `store`.
pub(crate) async fn run(
    scenario: Scenario,
    host: &HostProcess,
    store: &Store,
    upstream: &Upstream,
) -> Outcome {
    upstream.set_pace(scenario.pace);
    let rounds = if scenario.pace == Pace::FAST { 200 } else { 2 };
    let upstream_alone = upstream_alone(upstream, rounds).await;
    upstream.lateness();
    // Before the CPU is first read, so the scrape's own work is not counted in the scenario.
    let scraped = runtime::scrape(&reqwest::Client::new(), &host.url).await;
    let host_cpu0 = host.cpu_times().unwrap_or_default();
    let children_cpu0 = crate::procfs::descendants_cpu(host.pid())
        .unwrap_or_default()
        .0;
    let store_cpu0 = store.server_cpu();
    let bench_cpu0 = crate::procfs::cpu_of("/proc/self/stat").unwrap_or_default();
    let machine0 = MachineTime::now().ok();
    let watch = Watch::start(
        host,
        Probing {
            every: Duration::from_millis(50),
            fresh_connections: false,
        },
    );

    let sampler = scenario
        .sample_threads
        .then(|| threads::Sampler::start(host.pid()));
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(scenario.clients)
        .build()
        .expect("a plain HTTP client builds");
    let started = Instant::now();
    let deadline = started + scenario.duration;
    let tasks: Vec<_> = (0..scenario.clients)
        .map(|i| {
            let http = http.clone();
            let url = host.url.clone();
            let project = format!("{}-c{i:04}", scenario.name.to_lowercase());
            tokio::spawn(async move {
                let mut results = Vec::new();
                while Instant::now() < deadline {
                    results.push(client::conversation(&http, &url, TOKEN, &project).await);
                }
                results
            })
        })
        .collect();
    let mut samples = Vec::new();
    let mut errors = 0;
    let mut error_texts = Vec::new();
    for task in tasks {
        let results = task
            .await
            .unwrap_or_else(|e| vec![Err(format!("client task failed: {e}"))]);
        for result in results {
            match result {
                Ok(sample) => samples.push(sample),
                Err(e) => {
                    errors += 1;
                    if error_texts.len() < 5 {
                        error_texts.push(e);
                    }
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let stolen = machine0
        .zip(MachineTime::now().ok())
        .and_then(|(before, after)| after.stolen_since(before));
    let upstream_late = upstream.lateness();
    let threads = sampler.map(threads::Sampler::finish);
    let host_cpu = host.cpu_times().unwrap_or_default().since(host_cpu0);
    let (children_cpu, children_alive) =
        crate::procfs::descendants_cpu(host.pid()).unwrap_or_default();
    let children_cpu = children_cpu.saturating_sub(children_cpu0);
    let runtime = scraped
        .zip(runtime::scrape(&http, &host.url).await)
        .map(|(before, after)| after.since(before));
    let store_cpu = store_cpu0
        .zip(store.server_cpu())
        .map(|(before, after)| after.saturating_sub(before));
    let bench_cpu = crate::procfs::cpu_of("/proc/self/stat")
        .unwrap_or_default()
        .saturating_sub(bench_cpu0);
    let Watched {
        peak_rss,
        healthz,
        queued,
    } = watch.finish(host).await;

    let problems = check_files(host, &scenario).await;
    let problems = problems
        .into_iter()
        .chain(check_stored(&http, host, &samples).await);
    for problem in problems {
        errors += 1;
        if error_texts.len() < 5 {
            error_texts.push(problem);
        }
    }
    Outcome {
        scenario,
        samples,
        errors,
        error_texts,
        elapsed,
        peak_rss,
        host_cpu,
        children_cpu,
        children_alive,
        store_cpu,
        bench_cpu,
        upstream_alone,
        upstream_late,
        healthz,
        threads,
        runtime,
        queued,
        stolen,
    }
}

/// The median time a direct client takes for the conversation's three upstream requests.
async fn upstream_alone(upstream: &Upstream, rounds: usize) -> Duration {
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", upstream.base_url);
    let bodies: Vec<Value> = (0..3).map(upstream::direct_request).collect();
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        for body in &bodies {
            let Ok(response) = http.post(&url).json(body).send().await else {
                continue;
            };
            let _ = response.bytes().await;
        }
        times.push(started.elapsed());
    }
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Checks the page in up to 50 of the scenario's projects.
async fn check_files(host: &HostProcess, scenario: &Scenario) -> Vec<String> {
    let step = (scenario.clients / 50).max(1);
    let mut problems = Vec::new();
    for i in (0..scenario.clients).step_by(step) {
        let project = format!("{}-c{i:04}", scenario.name.to_lowercase());
        let path = host.project_root(&project).join(FILE);
        match tokio::fs::read_to_string(&path).await {
            Ok(text) if text == PAGE => {}
            Ok(_) => problems.push(format!("{}: unexpected content", path.display())),
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    problems
}

/// Reads back a few stored conversations: the history every provider accepts.
async fn check_stored(
    http: &reqwest::Client,
    host: &HostProcess,
    samples: &[Sample],
) -> Vec<String> {
    let step = (samples.len() / 5).max(1);
    let mut problems = Vec::new();
    for sample in samples.iter().step_by(step).take(5) {
        let url = format!("{}/conversations/{}", host.url, sample.conversation);
        let stored: Result<Value, String> = async {
            let response = http
                .get(&url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            response.json().await.map_err(|e| e.to_string())
        }
        .await;
        let roles: Vec<String> = stored
            .as_ref()
            .ok()
            .and_then(|v| v.as_array())
            .map(|m| {
                m.iter()
                    .filter_map(|m| m["role"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if roles
            != [
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant",
            ]
        {
            problems.push(format!(
                "stored conversation {}: roles {roles:?} ({:?})",
                sample.conversation,
                stored.err()
            ));
        }
    }
    problems
}
