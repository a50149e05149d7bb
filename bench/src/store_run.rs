//! [`StoreRun`]: S1–S3's outcomes on one conversation store, as the figures and the report
//! read them.

use crate::{load::Outcome, long_conversation::LongRun};

/// S1–S3 on one conversation store (each outcome names it).
#[derive(Debug)]
pub(crate) struct StoreRun {
    /// The host's RSS after start, before the warm-up.
    pub(crate) idle: u64,
    /// The scenarios run.
    pub(crate) outcomes: Vec<Outcome>,
    /// S4, when it ran.
    pub(crate) long: Option<LongRun>,
}
