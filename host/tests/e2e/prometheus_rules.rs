//! docs/prometheus/rojos.rules.yml, the fleet's recording and alerting rules: their own
//! `promtool` tests pass (the expressions' values and the alerts on two hosts' series), and
//! every series they read is one the real binary's `/metrics` gives, under that name. Needs
//! `promtool` (Debian's `prometheus` package; `.ci/run` installs it): without it the tests
//! fail with how to install it, never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::metrics::binary_after_one_chat;
use crate::support::host::get_at;

/// The folder of the rules and their tests.
fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/prometheus")
}

/// Runs `promtool ARGS` in the rules' folder; fails with its output unless it succeeds.
fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(rules_dir())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): install it with apt-get install -y prometheus \
                 (.ci/run installs it without starting its service)"
            )
        });
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_prometheus_rules_are_valid_and_pass_their_tests() {
    promtool(&["check", "rules", "rojos.rules.yml"]);
    promtool(&["test", "rules", "rojos.rules.test.yml"]);
}

/// The host's series the rules read: every name in them that begins with `rojos_` or
/// `process_` (a recorded series' name begins with `instance:`), comments left out.
fn series_read(rules: &str) -> Vec<String> {
    let mut names: Vec<String> = rules
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')))
        .filter(|token| token.starts_with("rojos_") || token.starts_with("process_"))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test]
async fn every_series_the_prometheus_rules_read_is_in_the_binary_s_metrics() {
    let rules = std::fs::read_to_string(rules_dir().join("rojos.rules.yml")).expect("the rules");
    let names = series_read(&rules);
    assert!(
        names.len() >= 8,
        "the rules read the process's and the runtime's series: {names:?}"
    );

    // After a finished chat, so the per-stop-reason counter has a series.
    let host = binary_after_one_chat().await;
    let text = get_at(&host.url, "/metrics")
        .await
        .text()
        .await
        .expect("a body");
    for name in &names {
        assert!(
            text.lines()
                .any(|line| line.starts_with(&format!("{name} "))
                    || line.starts_with(&format!("{name}{{"))),
            "the rules read {name}, which the host's /metrics does not give:\n{text}"
        );
    }
    host.upstream.assert_consumed();
}
