//! Writing a value a collector reads at scrape time (the process's and the runtime's figures).

use prometheus_client::registry::Unit;

/// Writes `metric`, a value a collector read at scrape time (a `ConstCounter` or `ConstGauge`),
/// as `name` (with the unit's suffix, and `_total` for a counter).
pub(super) fn encode_const<'a>(
    encoder: &'a mut prometheus_client::encoding::DescriptorEncoder<'_>,
    name: &'a str,
    help: &str,
    unit: Option<&'a Unit>,
    metric: &impl prometheus_client::encoding::EncodeMetric,
) -> std::fmt::Result {
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}
