//! The throttle between the model's tool-call progress and the NDJSON stream: the decoder
//! reports an argument's size after every chunk (a 40 KB argument streamed a few bytes at a
//! time is thousands of reports); the client gets `TOOL_CALL_PROGRESS` for a call at most
//! once per [`PROGRESS_INTERVAL`], counted from its `TOOL_CALL_STARTED`. See `docs/api.md`
//! ("Live status").
//!
//! Time rather than bytes: a person reads the size a few times a second at most, and a
//! per-byte step would still flood on a fast provider (1 MB in 4 KB steps is 250 lines) while
//! a slow one would show nothing for seconds. Ten a second per call bounds the stream by the
//! wall clock, whatever the size.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Least time between two `TOOL_CALL_PROGRESS` events of one call.
pub(super) const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// What was last sent for each started call of one model turn, by its index.
#[derive(Debug, Default)]
pub(super) struct ProgressThrottle {
    /// When the call was started or its last progress sent, and the bytes sent then.
    sent: HashMap<usize, (Instant, usize)>,
}

impl ProgressThrottle {
    /// A call was started at `now` (again, after a retry: its count starts over).
    pub(super) fn started(&mut self, index: usize, now: Instant) {
        self.sent.insert(index, (now, 0));
    }

    /// Whether the call's arguments at `bytes` should be reported at `now`: only for a
    /// started call, only when they grew, and only [`PROGRESS_INTERVAL`] after the last.
    pub(super) fn should_send(&mut self, index: usize, bytes: usize, now: Instant) -> bool {
        let Some((at, sent_bytes)) = self.sent.get_mut(&index) else {
            return false;
        };
        if bytes <= *sent_bytes || now.duration_since(*at) < PROGRESS_INTERVAL {
            return false;
        }
        *at = now;
        *sent_bytes = bytes;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_sent_at_most_once_per_interval_per_call() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut throttle = ProgressThrottle::default();
        throttle.started(0, t0);
        // 1,000 reports over one second, a millisecond apart: ten go out.
        let sent: Vec<u64> = (1..=1_000)
            .filter(|&n| throttle.should_send(0, n as usize * 40, ms(n)))
            .collect();
        assert_eq!(
            sent,
            vec![100, 200, 300, 400, 500, 600, 700, 800, 900, 1_000]
        );
    }

    #[test]
    fn calls_are_throttled_apart_and_unstarted_or_unchanged_ones_send_nothing() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(150);
        let mut throttle = ProgressThrottle::default();
        throttle.started(0, t0);
        throttle.started(1, t0);
        assert!(throttle.should_send(0, 10, later));
        // Call 1 has its own clock: call 0's report did not use it up.
        assert!(throttle.should_send(1, 10, later));
        // The same size again is no news, however late.
        assert!(!throttle.should_send(0, 10, later + Duration::from_secs(1)));
        // A call never started (a nameless fragment) is not reported.
        assert!(!throttle.should_send(7, 10, later));
    }

    #[test]
    fn a_restarted_call_counts_from_its_new_start() {
        let t0 = Instant::now();
        let mut throttle = ProgressThrottle::default();
        throttle.started(0, t0);
        assert!(throttle.should_send(0, 500, t0 + Duration::from_millis(100)));
        throttle.started(0, t0 + Duration::from_millis(120));
        assert!(!throttle.should_send(0, 20, t0 + Duration::from_millis(150)));
        assert!(throttle.should_send(0, 20, t0 + Duration::from_millis(220)));
    }
}
