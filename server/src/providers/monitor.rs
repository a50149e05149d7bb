//! The background checks: every provider is checked at start without delaying it, then again
//! when due (see [`status::recheck_after`](super::status::recheck_after)) and at once when
//! `rojos.toml` is reloaded (a changed provider is a new one). Started by [`crate::serve`]
//! only: the `check` and `tools` commands build the state but never contact a provider.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

use super::{choice::spawn_check, status::StatusBoard};
use crate::live::Live;

/// The longest the monitor sleeps before it looks at what is due again.
const MAX_SLEEP: Duration = Duration::from_secs(15);

/// Runs the checks until `stop` is cancelled.
pub async fn run(live: Arc<Live>, board: Arc<StatusBoard>, stop: CancellationToken) {
    loop {
        let settings = live.settings();
        let mut next = Instant::now() + MAX_SLEEP;
        for (name, provider) in &settings.providers {
            let Some(due) = board.due(name, provider) else {
                continue; // being checked
            };
            if due > Instant::now() {
                next = next.min(due);
            } else if board.begin(name, provider, Duration::ZERO) {
                drop(spawn_check(&board, &settings, name));
            }
        }
        // At least a moment between rounds, so a check that ends at once is not redone in a loop.
        let sleep = next
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(500));
        tokio::select! {
            () = stop.cancelled() => return,
            () = live.reloaded() => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }
}
