//! Printing, one module per part of the report: the machine (`machine`), each scenario's own
//! figures (`scenario`; no other system's: cross-system ratios come from the side-by-side
//! harness, one run of both on one machine), the abuse scenario's attacks with their goal
//! (`abuse`), the plugin boundary, the workers, the tool call paths and the drop-in deploy time
//! (`plugins`), and a closing Markdown table for bench/README.md with the performance goals
//! beside the figures (`summary`); with `--store both`, each scenario on PostgreSQL beside
//! SQLite (`stores`, goal: within 20 %). S4 (`long`), the idle memory per plugin (`idle`), the
//! thread states (`threads`) and the before/after comparison (`compare`) print from their own.
//! `format` and `percentiles` are how they all write a figure.

mod abuse;
mod compare;
mod format;
mod idle;
mod long;
mod machine;
mod percentiles;
mod plugins;
mod scenario;
mod stores;
mod summary;
mod threads;

pub(crate) use abuse::{abuse, attack};
pub(crate) use compare::comparison;
pub(crate) use format::mib;
pub(crate) use idle::idle;
pub(crate) use long::long;
pub(crate) use machine::machine;
pub(crate) use plugins::{boundary, dropin, mcp_paths, workers};
pub(crate) use scenario::scenario;
pub(crate) use stores::stores;
pub(crate) use summary::summary;
