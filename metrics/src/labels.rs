//! Every value each labelled metric can carry. `docs/api.md` ("GET /metrics") lists them all:
//! a test reads it and finds each value in its metric's row, and each metric the registry
//! renders in the table; the counting functions check (in debug builds) that a label is one
//! of these, so a new value cannot be counted without being listed here.

use rojos_llm::LlmError;

/// `rojos_chats_finished_total{stop_reason}`: `DONE.stopReason` as the wire spells it.
pub const STOP_REASONS: &[&str] = &[
    "completed",
    "max_steps",
    "provider_error",
    "cancelled",
    "internal_error",
    "limit_reached",
];

/// The `kind` of a turn that ended with no result and no provider error.
pub const NO_RESULT: &str = "no_result";

/// `rojos_tool_calls_total{outcome}`.
pub(super) const TOOL_OUTCOMES: &[&str] = &["ok", "error", "cancelled"];

/// `rojos_requests_limited_total{limit}`: chats' limits (`docs/configuration.md`, "Chat
/// limits"), file transfers' ("Transfers"), then MCP sessions' (`docs/mcp.md`, "Sessions").
pub(super) const LIMITS: &[&str] = &[
    "concurrency",
    "token",
    "rate",
    "transfers",
    "mcp_sessions_per_token",
    "mcp_sessions",
];

/// `rojos_tool_calls_refused_total{reason}`.
pub(super) const REFUSALS: &[&str] = &[
    "calls_per_turn",
    "turn_result_bytes",
    "run_result_bytes",
    "repeated",
];

/// `rojos_connections_closed_total{reason}`.
pub(super) const CLOSE_REASONS: &[&str] = &[
    "header_timeout",
    "idle",
    "evicted",
    "write_timeout",
    "refused",
];

/// `rojos_provider_errors_total{kind}`: the provider errors' kinds, and [`NO_RESULT`].
pub(super) fn provider_error_kinds() -> impl Iterator<Item = &'static str> {
    LlmError::KINDS.iter().copied().chain([NO_RESULT])
}

/// Every labelled metric, its label, and the label's values.
#[cfg(test)]
fn every_label() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "rojos_chats_finished_total",
            "stop_reason",
            STOP_REASONS.to_vec(),
        ),
        (
            "rojos_provider_errors_total",
            "kind",
            provider_error_kinds().collect(),
        ),
        ("rojos_tool_calls_total", "outcome", TOOL_OUTCOMES.to_vec()),
        ("rojos_requests_limited_total", "limit", LIMITS.to_vec()),
        (
            "rojos_tool_calls_refused_total",
            "reason",
            REFUSALS.to_vec(),
        ),
        (
            "rojos_connections_closed_total",
            "reason",
            CLOSE_REASONS.to_vec(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/api.md`, read as the reader reads it.
    fn api_doc() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The row of `metric` in the metrics table of `doc`.
    fn row<'d>(doc: &'d str, metric: &str) -> &'d str {
        let start = format!("| `{metric}` |");
        doc.lines()
            .find(|line| line.starts_with(&start))
            .unwrap_or_else(|| panic!("docs/api.md has no row for {metric}"))
    }

    #[test]
    fn every_label_value_is_in_its_metrics_row_of_the_api_doc() {
        let doc = api_doc();
        for (metric, label, values) in every_label() {
            let row = row(&doc, metric);
            assert!(
                row.contains(&format!("`{label}`")),
                "{metric}: no `{label}` in {row}"
            );
            let missing: Vec<_> = values
                .iter()
                .filter(|v| !row.contains(&format!("`{v}`")))
                .collect();
            assert!(
                missing.is_empty(),
                "docs/api.md does not list {missing:?} for {metric}{{{label}}}: {row}"
            );
        }
    }

    #[test]
    fn every_metric_rendered_has_a_row_in_the_api_doc() {
        let doc = api_doc();
        let text = super::super::Metrics::new().render(0);
        for line in text.lines() {
            let Some(declared) = line.strip_prefix("# TYPE rojos_") else {
                continue;
            };
            let (name, kind) = declared.split_once(' ').expect("# TYPE name kind");
            let name = match kind {
                "counter" if !name.ends_with("_total") => format!("rojos_{name}_total"),
                _ => format!("rojos_{name}"),
            };
            row(&doc, &name);
        }
    }
}
