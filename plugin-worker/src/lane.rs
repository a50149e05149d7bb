//! A worker's lane: a second socketpair to a worker that serves a project, for a call whose
//! server thread is a blocking one that waits for the answer anyway (a call with undo's
//! checkpoint work just before and after it, docs/plugins.md, "Isolation"). That thread
//! writes the call and reads the answer itself, one call at a time, so the answer wakes the
//! thread that waits for it and nothing else; on the worker's main socket it would wake the
//! supervising task first, which would then wake the thread.
//!
//! A lane carries the same frames as the main socket ([`crate::protocol`]) but no cancel: a
//! call given up while it runs on a lane ends its worker ([`LaneStop`]), as a call given up
//! on the main socket does. The worker serves its lane on a thread of its own
//! (`crate::worker`).

use std::{
    io::ErrorKind,
    os::{fd::OwnedFd, unix::net::UnixStream},
    sync::Mutex,
    time::Instant,
};

use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::protocol::{BlockingChannel, Call, CallFrame, FromWorker};

/// The server's end of a lane.
#[derive(Debug)]
pub(crate) struct Lane {
    channel: BlockingChannel,
}

/// Why a call on a lane has no answer.
#[derive(Debug)]
pub(crate) enum LaneError {
    /// The call could not be written: the worker does not read its lane (it could not start
    /// the lane's thread, or it is ending). It was not sent.
    NotSent,
    /// The deadline passed first.
    TimedOut,
    /// The worker's end closed: the worker is ending.
    Closed,
    /// The worker sent something other than this call's answer.
    Broken(String),
}

impl Lane {
    /// A lane: the server's end, and the worker's (to be inherited as
    /// [`crate::protocol::LANE_FD`]).
    pub(crate) fn pair() -> std::io::Result<(Lane, OwnedFd)> {
        let (ours, theirs) = UnixStream::pair()?;
        let channel = BlockingChannel::new(ours)?;
        Ok((Lane { channel }, OwnedFd::from(theirs)))
    }

    /// Sends call `id` and waits for its answer until `deadline`.
    pub(crate) fn call(
        &mut self,
        id: u64,
        call: Call<'_>,
        deadline: Instant,
    ) -> Result<Result<String, String>, LaneError> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .ok_or(LaneError::TimedOut)?;
        let stream = self.channel.stream();
        stream
            .set_read_timeout(Some(left))
            .and_then(|()| stream.set_write_timeout(Some(left)))
            .map_err(|e| LaneError::Broken(e.to_string()))?;
        self.channel
            .send(&CallFrame::Call {
                id,
                limits: call.limits,
                create_only: call.create_only,
                args: call.args,
            })
            .map_err(|e| match failed(e) {
                LaneError::Closed => LaneError::NotSent,
                other => other,
            })?;
        match self.channel.recv::<FromWorker>().map_err(failed)? {
            FromWorker::Done {
                id: answered,
                result,
            } if answered == id => Ok(result),
            // Named, not shown: a hostile worker's frame may be megabytes long.
            FromWorker::Done { id: answered, .. } => Err(LaneError::Broken(format!(
                "it answered call {answered} while call {id} waited"
            ))),
            FromWorker::Ready { .. } | FromWorker::Refused(_) => Err(LaneError::Broken(
                "it sent a start's answer in answer to a call".to_owned(),
            )),
        }
    }
}

/// The lane's error for a failed read or write.
fn failed(e: std::io::Error) -> LaneError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => LaneError::TimedOut,
        ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => {
            LaneError::Closed
        }
        _ => LaneError::Broken(e.to_string()),
    }
}

/// How the caller's async side stops a call that a blocking thread runs on a lane: that
/// thread cannot hear a cancellation while it waits in the socket, so [`LaneStop::stop`]
/// ends the worker the call runs on, which closes the lane under the thread. A call not yet
/// sent when it is stopped is never sent.
#[derive(Debug, Default)]
pub struct LaneStop(Mutex<StopState>);

#[derive(Debug, Default)]
struct StopState {
    stopped: bool,
    /// What ends the worker running the call, while it runs.
    running_on: Option<CancellationToken>,
}

impl LaneStop {
    /// Stops the call: its worker is ended if it runs, and it is not sent if it has not.
    pub fn stop(&self) {
        let mut state = lock(&self.0);
        state.stopped = true;
        if let Some(kill) = state.running_on.take() {
            kill.cancel();
        }
    }

    /// Whether [`LaneStop::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        lock(&self.0).stopped
    }

    /// The call is about to be sent to the worker that `kill` ends: false if it was stopped
    /// first.
    pub(crate) fn sending_to(&self, kill: &CancellationToken) -> bool {
        let mut state = lock(&self.0);
        if !state.stopped {
            state.running_on = Some(kill.clone());
        }
        !state.stopped
    }

    /// The call has its answer (or none will come).
    pub(crate) fn done(&self) {
        lock(&self.0).running_on = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rojos_plugin_api::Limits;

    use super::*;
    use crate::protocol::ToWorker;

    fn call() -> Call<'static> {
        Call {
            limits: Limits::default(),
            create_only: &[],
            args: "{}",
        }
    }

    /// A lane whose worker's end is served by `worker` on a thread of its own.
    fn lane(worker: impl FnOnce(BlockingChannel) + Send + 'static) -> Lane {
        let (lane, theirs) = Lane::pair().unwrap();
        let channel = BlockingChannel::new(UnixStream::from(theirs)).unwrap();
        std::thread::spawn(move || worker(channel));
        lane
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn a_call_gets_the_answer_of_its_id_and_the_lane_serves_the_next() {
        let mut lane = lane(|mut worker| {
            while let Ok(ToWorker::Call { id, args, .. }) = worker.recv::<ToWorker>() {
                let result = Ok(format!("{id}: {args}"));
                worker.send(&FromWorker::Done { id, result }).unwrap();
            }
        });
        for id in [7, 8] {
            let answer = lane.call(id, call(), soon()).unwrap();
            assert_eq!(answer, Ok(format!("{id}: {{}}")));
        }
    }

    #[test]
    fn an_answer_of_another_id_breaks_the_lane() {
        let mut lane = lane(|mut worker| {
            let _ = worker.recv::<ToWorker>();
            let result = Ok(String::new());
            worker.send(&FromWorker::Done { id: 99, result }).unwrap();
        });
        match lane.call(1, call(), soon()) {
            Err(LaneError::Broken(why)) => {
                assert_eq!(why, "it answered call 99 while call 1 waited");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_worker_that_closes_its_end_after_the_call_is_closed() {
        let mut lane = lane(|mut worker| {
            let _ = worker.recv::<ToWorker>();
        });
        assert!(matches!(
            lane.call(1, call(), soon()),
            Err(LaneError::Closed)
        ));
    }

    #[test]
    fn a_lane_nobody_serves_sends_nothing() {
        let (mut lane, theirs) = Lane::pair().unwrap();
        drop(theirs);
        assert!(matches!(
            lane.call(1, call(), soon()),
            Err(LaneError::NotSent)
        ));
    }

    #[test]
    fn an_answer_not_come_by_the_deadline_times_out() {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let mut lane = lane(move |mut worker| {
            let _ = worker.recv::<ToWorker>();
            let _ = wait.recv();
        });
        let deadline = Instant::now() + Duration::from_millis(100);
        assert!(matches!(
            lane.call(1, call(), deadline),
            Err(LaneError::TimedOut)
        ));
        assert!(matches!(
            lane.call(2, call(), Instant::now()),
            Err(LaneError::TimedOut)
        ));
        drop(done);
    }
}
