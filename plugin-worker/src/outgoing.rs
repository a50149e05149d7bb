//! The writing half of a worker's socket, shared by the callers ([`Outgoing`]): each frame
//! is written whole by whoever sends it, and what the socket does not take at once is queued
//! for the supervising task (`crate::supervisor`) to write as the socket drains.

use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use tokio::{
    net::{unix::OwnedWriteHalf, UnixStream},
    sync::Notify,
};
use tokio_util::codec::Encoder;

use crate::lock;
use crate::protocol::codec;

/// The socket's writing half, shared by the callers. A frame is written whole, without
/// waiting, by whoever sends it; what the socket does not take at once goes to the backlog,
/// which the supervising task writes as the socket drains, in order: a caller that gives up
/// mid-frame never leaves half a frame behind.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) half: OwnedWriteHalf,
    state: Mutex<OutState>,
    /// Wakes the supervising task when the backlog has bytes.
    pub(crate) backlog: Notify,
}

#[derive(Debug, Default)]
struct OutState {
    /// Bytes of frames not written yet, in order.
    backlog: BytesMut,
    /// The worker has ended: nothing is sent any more.
    closed: bool,
}

/// The worker has ended; the frame was not sent.
pub(crate) struct Closed;

impl Outgoing {
    /// Frames written to `half`.
    pub(crate) fn new(half: OwnedWriteHalf) -> Outgoing {
        Outgoing {
            half,
            state: Mutex::default(),
            backlog: Notify::new(),
        }
    }

    /// Sends `payload` as one frame: written now, or queued behind the backlog.
    pub(crate) fn send(&self, payload: &Bytes) -> Result<(), Closed> {
        let mut frame = BytesMut::with_capacity(payload.len() + 4);
        if codec().encode(payload.clone(), &mut frame).is_err() {
            // Longer than any frame the worker accepts: as good as never sent.
            return Err(Closed);
        }
        let mut state = lock(&self.state);
        if state.closed {
            return Err(Closed);
        }
        if state.backlog.is_empty() {
            match self.half.try_write(&frame) {
                Ok(n) if n == frame.len() => return Ok(()),
                Ok(n) => state.backlog.extend_from_slice(&frame[n..]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    state.backlog.extend_from_slice(&frame);
                }
                // The worker is gone; the supervising task sees the socket close and fails
                // the waiting calls with the cause.
                Err(_) => return Ok(()),
            }
        } else {
            state.backlog.extend_from_slice(&frame);
        }
        drop(state);
        self.backlog.notify_one();
        Ok(())
    }

    pub(crate) fn has_backlog(&self) -> bool {
        !lock(&self.state).backlog.is_empty()
    }

    /// Writes what the socket takes of the backlog now.
    pub(crate) fn flush_some(&self) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        while !state.backlog.is_empty() {
            match self.half.try_write(&state.backlog) {
                Ok(n) => {
                    let _ = state.backlog.split_to(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// No more frames: later sends fail with [`Closed`], and the worker reads the end of its
    /// input (its cue to exit) even while callers still hold the worker.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        state.backlog.clear();
        let stream: &UnixStream = self.half.as_ref();
        let _ = rustix::net::shutdown(stream, rustix::net::Shutdown::Write);
    }
}
