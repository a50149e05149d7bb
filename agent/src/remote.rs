//! Following a run another host is running, through the store they share
//! (`rojos_conversations::SharedFeeds`, published by `relay`): [`RemoteFollower`] reads the
//! feed's lines after its last one every [`POLL`], and ends after the run's `DONE`, or with an
//! `ERROR` and a `DONE` of its own (numbered on from the last line given, as every event of a
//! stream is; the run never made them) when the running host
//! stopped publishing before the run ended (it died or lost the database) or a newer run
//! replaced the feed.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use rojos_conversations::{ConversationId, FeedRead, SharedFeeds};

use super::{feed::numbered, Event, StopReason};

/// How often a follower reads the feed while nothing new is there.
pub const POLL: Duration = Duration::from_millis(150);

/// The most lines one read takes.
const LINES_PER_READ: usize = 256;

/// A client following a run of another host.
#[derive(Debug)]
pub struct RemoteFollower {
    shared: Arc<dyn SharedFeeds>,
    conversation: ConversationId,
    /// The run followed.
    run: String,
    /// The number of the last line given.
    next: u64,
    /// How long the store may fail to answer before the follower gives up.
    patience: Duration,
    ended: bool,
}

impl RemoteFollower {
    /// Follows the run `first` (a read of the conversation's feed) shows, from line `after`,
    /// which may be past what the store holds yet (the running host publishes a moment after
    /// its own clients read); gives up when the store cannot be read for `patience`.
    pub fn new(
        shared: Arc<dyn SharedFeeds>,
        conversation: ConversationId,
        first: &FeedRead,
        after: u64,
        patience: Duration,
    ) -> RemoteFollower {
        RemoteFollower {
            shared,
            conversation,
            run: first.run.clone(),
            next: after,
            patience,
            ended: false,
        }
    }

    /// The next lines, in order, each whole; `None` once the run's `DONE` (or the
    /// follower's own `ERROR` and `DONE`) was given.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        let mut failing = Duration::ZERO;
        loop {
            match self
                .shared
                .read(&self.conversation, self.next, LINES_PER_READ)
                .await
            {
                Err(e) => {
                    failing += POLL;
                    if failing >= self.patience {
                        return Some(self.fail(&format!(
                            "this server cannot read the reply's events from the conversation \
                             store ({e}); the conversation keeps what was stored: reopen it"
                        )));
                    }
                }
                Ok(None) => {
                    return Some(self.fail(
                        "the reply's events are no longer kept; the conversation holds what was \
                         stored: reopen it",
                    ))
                }
                Ok(Some(read)) if read.run != self.run => {
                    return Some(self.fail(
                        "a newer reply in this conversation replaced the one followed; follow \
                         it again without `after`",
                    ))
                }
                Ok(Some(read)) => {
                    failing = Duration::ZERO;
                    let mut chunk = String::new();
                    for (seq, line) in &read.lines {
                        if *seq != self.next + 1 {
                            break;
                        }
                        chunk.push_str(line);
                        chunk.push('\n');
                        self.next = *seq;
                    }
                    if !chunk.is_empty() {
                        return Some(Bytes::from(chunk));
                    }
                    if self.next >= read.last_seq {
                        if read.done && self.next > read.last_seq {
                            // Asked from an event the run, now ended, never made.
                            return Some(self.fail(&format!(
                                "after={} is past the run's last event ({}); ask from an event \
                                 number the run gave (or 0 for all of it)",
                                self.next, read.last_seq
                            )));
                        }
                        if read.done {
                            self.ended = true;
                            return None;
                        }
                        if !read.alive {
                            return Some(self.fail(
                                "the server running this reply stopped before it ended (it \
                                 went down or lost the database); the conversation keeps what \
                                 was stored: reopen it, or send the message again",
                            ));
                        }
                    }
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Ends the stream with an `ERROR` saying `message` and a `DONE`, numbered on.
    fn fail(&mut self, message: &str) -> Bytes {
        self.ended = true;
        let error = Event::Error {
            message: message.to_owned(),
        };
        let done = Event::Done {
            conversation_id: self.conversation.to_string(),
            stop_reason: StopReason::InternalError,
        };
        let mut lines = String::new();
        for event in [error, done] {
            self.next += 1;
            lines.push_str(&numbered(&event, self.next));
        }
        Bytes::from(lines)
    }
}
