//! The host's own account of a scenario, from its `/metrics` read before and after: how long
//! its runtime's workers were busy, how often they went to sleep with nothing to run, and the
//! CPU time it reports for itself (`process_cpu_seconds_total`, which a fleet watches in
//! production: the bench prints it beside its own reading of `/proc`, so the two can be
//! compared); and, sampled while the scenario runs (`watch`), the tasks waiting in its
//! runtime's shared queue. A host without these metrics (an older `--baseline`) gives none.

use std::time::Duration;

use crate::host::TOKEN;

/// The figures read from one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scrape {
    busy_seconds: f64,
    parks: f64,
    cpu_seconds: f64,
}

/// What the host's runtime did over a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RuntimeUse {
    /// The workers' busy time, summed.
    pub(crate) busy: Duration,
    /// Times a worker went to sleep with no task to run.
    pub(crate) parks: u64,
    /// The CPU time the host reports for itself.
    pub(crate) reported_cpu: Duration,
}

/// Reads the host's `/metrics` at `url`; `None` when it cannot, or lacks the figures.
pub(crate) async fn scrape(http: &reqwest::Client, url: &str) -> Option<Scrape> {
    parse(&metrics_text(http, url).await?)
}

/// Reads how many tasks wait in the host's runtime's shared queue now; `None` when it cannot.
pub(crate) async fn queued_tasks(http: &reqwest::Client, url: &str) -> Option<f64> {
    value(
        &metrics_text(http, url).await?,
        "rojos_runtime_global_queue_depth",
    )
}

async fn metrics_text(http: &reqwest::Client, url: &str) -> Option<String> {
    let response = http
        .get(format!("{url}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .ok()?;
    response.text().await.ok()
}

/// The value of the unlabelled series `name` in a `/metrics` text.
fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
}

/// The figures in a `/metrics` text.
fn parse(text: &str) -> Option<Scrape> {
    Some(Scrape {
        busy_seconds: value(text, "rojos_runtime_busy_seconds_total")?,
        parks: value(text, "rojos_runtime_worker_parks_total")?,
        cpu_seconds: value(text, "process_cpu_seconds_total")?,
    })
}

impl Scrape {
    /// What happened between `earlier` and this scrape.
    pub(crate) fn since(self, earlier: Scrape) -> RuntimeUse {
        let seconds = |after: f64, before: f64| Duration::from_secs_f64((after - before).max(0.0));
        RuntimeUse {
            busy: seconds(self.busy_seconds, earlier.busy_seconds),
            parks: (self.parks - earlier.parks).max(0.0) as u64,
            reported_cpu: seconds(self.cpu_seconds, earlier.cpu_seconds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_s_runtime_use_is_the_difference_of_two_scrapes() {
        let text = |busy: &str, parks: &str, cpu: &str| {
            format!(
                "# TYPE rojos_runtime_busy_seconds_total counter\n\
                 rojos_runtime_busy_seconds_total {busy}\n\
                 rojos_runtime_worker_parks_total {parks}\n\
                 rojos_runtime_workers 2\n\
                 process_cpu_seconds_total {cpu}\n"
            )
        };
        let before = parse(&text("1.5", "100", "2.25")).expect("figures");
        let after = parse(&text("4", "1100", "5.75")).expect("figures");
        assert_eq!(
            after.since(before),
            RuntimeUse {
                busy: Duration::from_millis(2_500),
                parks: 1_000,
                reported_cpu: Duration::from_millis(3_500),
            }
        );
        assert_eq!(parse("rojos_runtime_workers 2\n"), None, "an older host");
    }
}
