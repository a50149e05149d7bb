//! Whether a call's plugin starts, settled once between the call's blocking thread and its
//! caller ([`Start`]). The thread first runs [`AroundCall::before`](super::AroundCall), which
//! may wait for the project's lock (held by an undo, here or on another host); meanwhile the
//! caller gives the call up at its deadline, when its run is stopped, or when it is dropped
//! ([`wait_for_thread`]). Whichever comes first wins, so a call reported as not run never
//! runs later, and the model hears at once rather than when the lock is freed.

use std::{
    sync::atomic::{AtomicU8, Ordering},
    time::Duration,
};

use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::outcome::{FailureKind, ToolFailure};

/// Who settles whether a call's plugin runs: its thread, once `before` is done
/// ([`Start::run`]), or its caller, once it gives up ([`Start::give_up`]).
#[derive(Debug, Default)]
pub(super) struct Start(AtomicU8);

impl Start {
    const WAITING: u8 = 0;
    const RUNNING: u8 = 1;
    const GIVEN_UP: u8 = 2;

    /// The call's thread: whether the plugin may run (the caller has not given up).
    pub(super) fn run(&self) -> bool {
        self.settle(Self::RUNNING)
    }

    /// The caller: whether the plugin had not started (and now never will).
    pub(super) fn give_up(&self) -> bool {
        self.settle(Self::GIVEN_UP)
    }

    fn settle(&self, to: u8) -> bool {
        self.0
            .compare_exchange(Self::WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// How the caller's wait for a call's thread ended.
pub(super) enum Waited<T> {
    /// The thread ended, with what it returned.
    Joined(Result<T, JoinError>),
    /// The plugin had not started and now never will: the deadline passed, or the run was
    /// stopped (`stopped`).
    NotStarted { stopped: bool },
    /// The deadline passed while the plugin ran.
    PastDeadline,
}

/// Waits for `thread`, the blocking thread of a call settled by `start`, until it ends or
/// `deadline` passes. A stop (`stop` cancelled) before the plugin started gives the call up;
/// after, the plugin is left to finish. `stop` is `None` for a call with no work before it,
/// whose thread starts the plugin at once: a stop then lets it run, as it always did. A
/// caller dropped while it waits gives the call up.
pub(super) async fn wait_for_thread<T>(
    thread: &mut JoinHandle<T>,
    start: &Start,
    stop: Option<&CancellationToken>,
    deadline: tokio::time::Instant,
) -> Waited<T> {
    let _give_up_if_dropped = GiveUpOnDrop(start);
    let mut stop_heard = stop.is_none();
    let stopped = async {
        match stop {
            Some(stop) => stop.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            joined = &mut *thread => return Waited::Joined(joined),
            () = &mut stopped, if !stop_heard => {
                if start.give_up() {
                    return Waited::NotStarted { stopped: true };
                }
                stop_heard = true;
            }
            () = tokio::time::sleep_until(deadline) => {
                return if start.give_up() {
                    Waited::NotStarted { stopped: false }
                } else {
                    Waited::PastDeadline
                };
            }
        }
    }
}

/// Gives the call up when the wait for its thread ends; a no-op once the thread settled.
struct GiveUpOnDrop<'a>(&'a Start);

impl Drop for GiveUpOnDrop<'_> {
    fn drop(&mut self) {
        self.0.give_up();
    }
}

/// The model's error for a call given up before its plugin started: it waited for what must
/// come first (the project's lock while an undo restores it, its recording) until its
/// deadline passed (`timeout`) or its run was stopped (`stopped`).
pub(super) fn not_started(name: &str, timeout: Duration, stopped: bool) -> ToolFailure {
    if stopped {
        return ToolFailure::new(
            FailureKind::Refused,
            format!(
                "tool {name} was not run: the run was stopped while the call waited to start (the project was busy, for example restoring an undo); nothing was changed"
            ),
        );
    }
    ToolFailure::new(
        FailureKind::Timeout,
        format!(
            "tool {name} was not run: it could not start within {:.1} s (the project was busy, for example restoring an undo); nothing was changed, so it is safe to call it again",
            timeout.as_secs_f64()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_to_settle_wins_and_the_other_hears_so() {
        let started = Start::default();
        assert!(started.run());
        assert!(!started.give_up(), "a started plugin cannot be given up");
        let given_up = Start::default();
        assert!(given_up.give_up());
        assert!(!given_up.run(), "a given-up call never starts");
    }

    /// A thread that settles `start` (running the plugin, or not) once `go` says so.
    fn thread_waiting_for(
        start: &std::sync::Arc<Start>,
        go: std::sync::mpsc::Receiver<()>,
    ) -> JoinHandle<bool> {
        let start = std::sync::Arc::clone(start);
        tokio::task::spawn_blocking(move || {
            let _ = go.recv();
            start.run()
        })
    }

    #[tokio::test]
    async fn a_stop_before_the_start_gives_the_call_up_and_one_after_lets_it_finish() {
        let far = tokio::time::Instant::now() + Duration::from_secs(600);
        let start = std::sync::Arc::new(Start::default());
        let (go, wait) = std::sync::mpsc::channel();
        let mut thread = thread_waiting_for(&start, wait);
        let stop = CancellationToken::new();
        stop.cancel();
        let waited = wait_for_thread(&mut thread, &start, Some(&stop), far).await;
        assert!(matches!(waited, Waited::NotStarted { stopped: true }));
        go.send(()).unwrap();
        assert!(
            !thread.await.unwrap(),
            "the thread did not start the plugin"
        );

        let start = std::sync::Arc::new(Start::default());
        assert!(start.run(), "the plugin started");
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut thread = tokio::task::spawn_blocking(move || wait.recv().is_ok());
        let waiting = tokio::spawn(async move {
            let stop = CancellationToken::new();
            stop.cancel();
            matches!(
                wait_for_thread(&mut thread, &start, Some(&stop), far).await,
                Waited::Joined(Ok(true))
            )
        });
        go.send(()).unwrap();
        assert!(waiting.await.unwrap(), "a started call is waited for");
    }

    #[tokio::test]
    async fn with_no_stop_to_hear_a_call_not_yet_started_still_runs() {
        let far = tokio::time::Instant::now() + Duration::from_secs(600);
        let start = std::sync::Arc::new(Start::default());
        let (go, wait) = std::sync::mpsc::channel();
        let mut thread = thread_waiting_for(&start, wait);
        go.send(()).unwrap();
        let waited = wait_for_thread(&mut thread, &start, None, far).await;
        assert!(
            matches!(waited, Waited::Joined(Ok(true))),
            "the plugin started"
        );
    }

    #[tokio::test]
    async fn the_deadline_gives_up_a_call_not_started_and_reports_one_that_runs() {
        let soon = tokio::time::Instant::now() + Duration::from_millis(20);
        let never = CancellationToken::new();
        let start = std::sync::Arc::new(Start::default());
        let (go, wait) = std::sync::mpsc::channel();
        let mut thread = thread_waiting_for(&start, wait);
        let waited = wait_for_thread(&mut thread, &start, Some(&never), soon).await;
        assert!(matches!(waited, Waited::NotStarted { stopped: false }));
        go.send(()).unwrap();
        assert!(
            !thread.await.unwrap(),
            "the thread did not start the plugin"
        );

        let start = std::sync::Arc::new(Start::default());
        assert!(start.run());
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut thread = tokio::task::spawn_blocking(move || wait.recv().is_ok());
        let waited = wait_for_thread(&mut thread, &start, Some(&never), soon).await;
        assert!(matches!(waited, Waited::PastDeadline));
        drop(go);
        assert!(!thread.await.unwrap());
    }

    #[tokio::test]
    async fn a_wait_dropped_before_the_start_gives_the_call_up() {
        let far = tokio::time::Instant::now() + Duration::from_secs(600);
        let start = std::sync::Arc::new(Start::default());
        let (go, wait) = std::sync::mpsc::channel();
        let mut thread = thread_waiting_for(&start, wait);
        let never = CancellationToken::new();
        let waiting = wait_for_thread(&mut thread, &start, Some(&never), far);
        // Polled once (registering its waits), then dropped, as a dropped run drops it.
        assert!(tokio::time::timeout(Duration::from_millis(1), waiting)
            .await
            .is_err());
        go.send(()).unwrap();
        assert!(
            !thread.await.unwrap(),
            "the thread did not start the plugin"
        );
    }
}
