//! A run's events, numbered and kept, so that a run belongs to its conversation rather than
//! to the request that started it: any client of the conversation follows it from any event
//! on (`GET /conversations/{id}/events?after=N`), a client that leaves does not end it, and
//! stop is an explicit request (`docs/api.md`, "Runs").
//!
//! Each run has one [`Feed`]: the lines of its events, numbered from 1 (`seq`), and the
//! clients following it ([`Follower`]). The run stops by itself once nobody has followed it for
//! `[limits] unattended_run_secs` (`0`: as soon as its last client leaves, the behaviour of
//! servers before runs outlived their request). A finished run's feed is kept for
//! [`KEPT_AFTER_DONE`], so that a client that lost its connection near the end still reads
//! the end; the history holds everything after that. The lines a feed keeps are bounded by the
//! run's budgets (each event is a piece of what the run stores, or a few bytes of status).
//!
//! With a store several hosts share, `relay` publishes each feed for the other hosts and
//! `remote` follows another host's (`docs/deploy.md`, "Several hosts"); a feed only wakes its
//! relay ([`Feed::push`] stays a memory write), and a follower on another host counts as
//! following ([`Feed::followed_elsewhere`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use bytes::Bytes;
use rojos_conversations::ConversationId;
use serde::Serialize;
use tokio::{
    sync::{watch, Notify},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::Event;

/// How long a finished run's events stay readable.
pub const KEPT_AFTER_DONE: Duration = Duration::from_secs(60);

/// Up to about this many bytes of waiting events go into one chunk of a follower's body.
const CHUNK_BYTES: usize = 32 * 1024;

/// What ends a run nobody follows (`[limits] unattended_run_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unattended {
    /// The run stops as soon as its last client leaves.
    StopAtOnce,
    /// The run stops once nobody followed it for this long.
    After(Duration),
}

/// Why a run was stopped by its feed rather than by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// A client asked (`POST /conversations/{id}/stop`).
    Asked,
    /// Nobody followed it ([`Unattended`]).
    Unattended,
}

/// The feeds of this host's runs, by conversation.
#[derive(Debug)]
pub struct Feeds {
    runs: Mutex<HashMap<ConversationId, Arc<Feed>>>,
    /// When a run nobody follows stops.
    pub unattended: Unattended,
}

impl Feeds {
    /// No feeds yet.
    pub fn new(unattended: Unattended) -> Feeds {
        Feeds {
            runs: Mutex::new(HashMap::new()),
            unattended,
        }
    }

    /// A new feed for a run of `conversation` stopped by `stop` (replacing the previous run's),
    /// with its first follower: the client that started the run.
    pub(super) fn open(
        &self,
        conversation: &ConversationId,
        stop: CancellationToken,
    ) -> (Arc<Feed>, Follower) {
        let (changed, _) = watch::channel(Progress::default());
        let feed = Arc::new(Feed {
            run: format!(
                "{:032x}",
                rojos_conversations::LeaseHolder::generate().as_u128()
            ),
            log: Mutex::new(Vec::new()),
            pushed: Notify::new(),
            changed,
            stop,
            cause: Mutex::new(None),
            last_left: Mutex::new(Instant::now()),
        });
        let follower = feed.follow(0);
        self.lock().insert(conversation.clone(), Arc::clone(&feed));
        (feed, follower)
    }

    /// The feed of `conversation`'s current or last run on this host, if still kept.
    pub fn get(&self, conversation: &ConversationId) -> Option<Arc<Feed>> {
        self.lock().get(conversation).cloned()
    }

    /// Forgets `feed` (a finished run's, once [`KEPT_AFTER_DONE`] passed), unless a newer
    /// run of its conversation replaced it already.
    pub(super) fn forget(&self, conversation: &ConversationId, feed: &Arc<Feed>) {
        let mut runs = self.lock();
        if runs
            .get(conversation)
            .is_some_and(|kept| Arc::ptr_eq(kept, feed))
        {
            runs.remove(conversation);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationId, Arc<Feed>>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How far a feed got: its number of lines, and whether the run ended (`DONE` is its last).
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    lines: u64,
    done: bool,
}

/// One run's numbered events and who follows them.
#[derive(Debug)]
pub struct Feed {
    /// The run's random id, naming its feed in a shared store.
    run: String,
    /// Line `seq` is at index `seq - 1`.
    log: Mutex<Vec<Arc<str>>>,
    /// Wakes the relay publishing the feed to a shared store, if any.
    pushed: Notify,
    /// Wakes followers; its receivers are the followers, so it counts them.
    changed: watch::Sender<Progress>,
    /// The run's stop token.
    stop: CancellationToken,
    cause: Mutex<Option<StopCause>>,
    /// When the last follower left (or the feed was opened).
    last_left: Mutex<Instant>,
}

/// `event` numbered `seq`, as a line of a stream (newline included).
pub(super) fn numbered(event: &Event, seq: u64) -> String {
    let mut line =
        serde_json::to_string(&Numbered { event, seq }).expect("events always serialise");
    line.push('\n');
    line
}

/// An event with its number, as a line of the stream.
#[derive(Serialize)]
struct Numbered<'a> {
    #[serde(flatten)]
    event: &'a Event,
    seq: u64,
}

impl Feed {
    /// Adds `event` as the next numbered line and wakes the followers.
    pub(super) fn push(&self, event: &Event) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = log.len() as u64 + 1;
        log.push(numbered(event, seq).into());
        let done = matches!(event, Event::Done { .. });
        drop(log);
        self.changed.send_replace(Progress { lines: seq, done });
        self.pushed.notify_one();
    }

    /// The run's random id (its feed's name in a shared store).
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The lines after number `after` (to the last), and whether the run ended: then its
    /// `DONE` is the last of the lines given so far.
    pub(super) fn lines_after(&self, after: u64) -> (Vec<Arc<str>>, bool) {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let lines = log.iter().skip(after as usize).cloned().collect();
        // `done` is set just after `DONE` is added: read while the log is locked, it is true
        // only once `DONE` is in the log (and then `DONE` is its last line).
        let done = self.changed.borrow().done;
        (lines, done)
    }

    /// Resolves after the next [`Feed::push`] (at once if one happened since the last call).
    pub(super) async fn pushed(&self) {
        self.pushed.notified().await;
    }

    /// Notes that a client on another host read the feed `ago`: the run is followed, so
    /// nobody-follows time counts from then (see [`Feed::stop_when_unattended`]).
    pub(super) fn followed_elsewhere(&self, ago: Duration) {
        let Some(at) = Instant::now().checked_sub(ago) else {
            return;
        };
        let mut left = self
            .last_left
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if at > *left {
            *left = at;
        }
    }

    /// A new follower reading the lines after number `after`.
    pub fn follow(self: &Arc<Self>, after: u64) -> Follower {
        Follower {
            feed: Arc::clone(self),
            next: after,
            changed: self.changed.subscribe(),
        }
    }

    /// Whether the run ended (its `DONE` is the last line).
    pub fn is_done(&self) -> bool {
        self.changed.borrow().done
    }

    /// The number of the last line so far.
    pub fn last_seq(&self) -> u64 {
        self.changed.borrow().lines
    }

    /// Stops the run for `cause`; `false` when it had ended or was stopped already.
    pub fn stop(&self, cause: StopCause) -> bool {
        if self.is_done() || self.stop.is_cancelled() {
            return false;
        }
        self.cause
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(cause);
        self.stop.cancel();
        true
    }

    /// The run's stop token.
    pub(super) fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Why the feed stopped the run, if it did.
    pub(super) fn cause(&self) -> Option<StopCause> {
        *self.cause.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves once nobody has followed the run for as long as `unattended` allows, and
    /// stops it then. Never resolves while someone follows.
    pub(super) async fn stop_when_unattended(&self, unattended: Unattended) {
        loop {
            self.changed.closed().await;
            let wait = match unattended {
                Unattended::StopAtOnce => Duration::ZERO,
                Unattended::After(wait) => wait,
            };
            let left = *self
                .last_left
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            tokio::time::sleep_until(left + wait).await;
            let left = *self
                .last_left
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if self.changed.receiver_count() == 0 && left + wait <= Instant::now() {
                tracing::info!(
                    unattended_secs = wait.as_secs_f64(),
                    "nobody follows the run: stopping it"
                );
                self.stop(StopCause::Unattended);
                return;
            }
        }
    }
}

/// One client following a feed: its body's chunks.
#[derive(Debug)]
pub struct Follower {
    feed: Arc<Feed>,
    /// The number of the last line given.
    next: u64,
    changed: watch::Receiver<Progress>,
}

impl Follower {
    /// The next lines (up to about [`CHUNK_BYTES`], each whole, in order); `None` once the
    /// run ended and its last line was given.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            let progress = *self.changed.borrow_and_update();
            if self.next < progress.lines {
                return Some(self.take());
            }
            if progress.done {
                return None;
            }
            // The sender lives as long as the feed, which this follower holds.
            if self.changed.changed().await.is_err() {
                return None;
            }
        }
    }

    fn take(&mut self) -> Bytes {
        let log = self.feed.log.lock().unwrap_or_else(PoisonError::into_inner);
        let mut chunk = String::new();
        for line in log.iter().skip(self.next as usize) {
            if !chunk.is_empty() && chunk.len() + line.len() > CHUNK_BYTES {
                break;
            }
            chunk.push_str(line);
            self.next += 1;
        }
        Bytes::from(chunk)
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        *self
            .feed
            .last_left
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(text: &str) -> Event {
        Event::Chat { text: text.into() }
    }

    fn feed() -> (Arc<Feed>, Follower) {
        let feeds = Feeds::new(Unattended::StopAtOnce);
        feeds.open(
            &ConversationId::parse("c1").unwrap(),
            CancellationToken::new(),
        )
    }

    #[tokio::test]
    async fn lines_are_numbered_and_a_late_follower_reads_from_where_it_asks() {
        let (feed, mut first) = feed();
        for text in ["a", "b", "c"] {
            feed.push(&chat(text));
        }
        let chunk = first.next_chunk().await.unwrap();
        assert_eq!(
            chunk,
            concat!(
                "{\"type\":\"CHAT\",\"text\":\"a\",\"seq\":1}\n",
                "{\"type\":\"CHAT\",\"text\":\"b\",\"seq\":2}\n",
                "{\"type\":\"CHAT\",\"text\":\"c\",\"seq\":3}\n"
            )
        );
        let mut late = feed.follow(2);
        feed.push(&Event::Done {
            conversation_id: "c1".into(),
            stop_reason: super::super::StopReason::Completed,
        });
        let rest = late.next_chunk().await.unwrap();
        let rest = String::from_utf8(rest.to_vec()).unwrap();
        assert!(rest.starts_with("{\"type\":\"CHAT\",\"text\":\"c\",\"seq\":3}\n"));
        assert!(rest.ends_with("\"seq\":4}\n"), "{rest}");
        assert_eq!(late.next_chunk().await, None);
        assert!(first.next_chunk().await.is_some());
        assert_eq!(first.next_chunk().await, None);
    }

    #[tokio::test]
    async fn a_run_nobody_follows_is_stopped_and_one_followed_is_not() {
        let (feed, follower) = feed();
        let watch = feed.stop_when_unattended(Unattended::StopAtOnce);
        tokio::pin!(watch);
        tokio::select! {
            biased;
            () = &mut watch => panic!("stopped while followed"),
            () = tokio::task::yield_now() => {}
        }
        drop(follower);
        watch.await;
        assert_eq!(feed.cause(), Some(StopCause::Unattended));
        assert!(!feed.stop(StopCause::Asked), "already stopped");
    }

    #[tokio::test]
    async fn a_relay_reads_the_lines_after_its_last_and_learns_when_done_is_among_them() {
        let (feed, _follower) = feed();
        feed.push(&chat("a"));
        feed.push(&chat("b"));
        let (lines, done) = feed.lines_after(1);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("\"seq\":2"), "{}", lines[0]);
        assert!(!done);
        feed.push(&Event::Done {
            conversation_id: "c1".into(),
            stop_reason: super::super::StopReason::Completed,
        });
        let (lines, done) = feed.lines_after(2);
        assert!(done && lines.len() == 1 && lines[0].contains("\"DONE\""));
        assert_eq!(feed.lines_after(3), (Vec::new(), true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_on_another_host_keeps_the_run_attended() {
        let (feed, follower) = feed();
        drop(follower);
        let watch = feed.stop_when_unattended(Unattended::After(Duration::from_secs(10)));
        tokio::pin!(watch);
        tokio::select! {
            () = &mut watch => panic!("stopped before its time"),
            () = tokio::time::sleep(Duration::from_secs(8)) => {}
        }
        // Read on another host a second ago: nobody-follows time starts again from then.
        feed.followed_elsewhere(Duration::from_secs(1));
        tokio::select! {
            () = &mut watch => panic!("stopped while followed on another host"),
            () = tokio::time::sleep(Duration::from_secs(8)) => {}
        }
        watch.await;
        assert_eq!(feed.cause(), Some(StopCause::Unattended));
    }
}
