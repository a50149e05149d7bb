//! The wire between the server and a worker: one Unix socketpair, frames of a 4-byte length
//! and a JSON message (tokio-util's [`LengthDelimitedCodec`]). The server's first frame is
//! [`ToWorker::Start`]; the worker answers [`FromWorker::Ready`] once its sandbox is in place
//! and the library is open (or [`FromWorker::Refused`] and exits). Calls then travel as
//! [`ToWorker::Call`] with an id chosen by the server, any number at once; each ends with one
//! [`FromWorker::Done`] of the same id, in any order. [`ToWorker::Cancel`] tells the worker
//! the server no longer waits for a call (its result is dropped); code that runs too long is
//! stopped by ending the worker, never by asking.
//!
//! Besides the socket (descriptor [`SOCKET_FD`]), a worker that serves a project inherits the
//! project's root folder, opened by the server, as descriptor [`ROOT_FD`], and a second
//! socketpair's end, its lane, as [`LANE_FD`]: the same frames, one call at a time, for a
//! server thread that waits for the answer itself (`crate::lane`).

use std::{
    io::{Read, Write},
    os::{fd::RawFd, unix::net::UnixStream},
    path::PathBuf,
};

use bytes::{Bytes, BytesMut};
use rojos_plugin_api::Limits;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use crate::{module::ModuleError, sandbox::SandboxSettings};

/// The worker's end of the socketpair.
pub const SOCKET_FD: RawFd = 3;
/// The project root a worker serves, when it serves one.
pub const ROOT_FD: RawFd = 4;
/// The worker's end of its lane, when it has one ([`Start::lane`]).
pub const LANE_FD: RawFd = 5;
/// The largest frame either side accepts: a tool's result is capped far below this by the
/// server's own limits, so a longer frame is a broken or hostile peer.
pub const MAX_FRAME: usize = 64 << 20;

/// What the worker is for: sent once, first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    /// The plugin library (the server's private copy).
    pub library: PathBuf,
    /// The project whose root is descriptor [`ROOT_FD`]; `None`: no project (the worker only
    /// reports the manifest).
    pub project_id: Option<String>,
    /// The sandbox and limits to apply before the library is opened.
    pub sandbox: SandboxSettings,
    /// Whether descriptor [`LANE_FD`] is the worker's lane.
    #[serde(default)]
    pub lane: bool,
}

/// A message from the server to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToWorker {
    /// The first message.
    Start(Start),
    /// Run the plugin's `call` on `args` (JSON text, already checked against the schema).
    Call {
        /// Chosen by the server; the answer carries it.
        id: u64,
        /// The file tools' limits for this call.
        limits: Limits,
        /// The paths the call may only create at (`CallContext::create_only`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        create_only: Vec<String>,
        /// The model's arguments.
        args: String,
    },
    /// The server no longer waits for call `id`.
    Cancel {
        /// The call.
        id: u64,
    },
}

/// Why a worker did not start serving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    /// The library is not a usable plugin.
    #[error(transparent)]
    Module(ModuleError),
    /// The sandbox is required and could not be put in place.
    #[error("the sandbox could not be put in place: {0}")]
    Sandbox(String),
    /// The start message was not understood.
    #[error("the worker did not understand its start: {0}")]
    Protocol(String),
}

/// A message from a worker to the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromWorker {
    /// Sandboxed and loaded: the plugin's manifest (JSON text) or the error it gave instead,
    /// and the parts of the sandbox this kernel lacks (empty when all of it is in place).
    Ready {
        /// The manifest, as the plugin returned it.
        manifest: Result<String, String>,
        /// What could not be enforced (best-effort mode only).
        missing: Vec<String>,
    },
    /// Not serving: why. The worker exits.
    Refused(Refusal),
    /// Call `id` returned: the plugin's text, or its error (a `ToolError` as JSON).
    Done {
        /// The call.
        id: u64,
        /// What the plugin returned.
        result: Result<String, String>,
    },
}

/// The frame codec both ends use.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// `message` as a frame's payload.
pub fn encode<T: Serialize>(message: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(message).expect("protocol messages always serialise"))
}

/// A frame's payload as a message.
///
/// # Errors
///
/// The payload is not a message of this protocol.
pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(frame)
}

/// A call as the server encodes it: the same frame as [`ToWorker::Call`], from borrowed
/// arguments (the caller keeps its text for a retry, and nothing is copied to encode it).
#[derive(Debug, Clone, Copy, Serialize)]
pub enum CallFrame<'a> {
    /// [`ToWorker::Call`].
    Call {
        /// Chosen by the server; the answer carries it.
        id: u64,
        /// The file tools' limits for this call.
        limits: Limits,
        /// The paths the call may only create at (`CallContext::create_only`).
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        create_only: &'a [String],
        /// The model's arguments.
        args: &'a str,
    },
}

/// One call as the server hands it to a worker: what [`CallFrame::Call`] carries besides
/// its id.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The file tools' limits for this call.
    pub limits: Limits,
    /// The paths the call may only create at, never replace
    /// (`rojos_plugin_api::CallContext::create_only`).
    pub create_only: &'a [String],
    /// The model's arguments (JSON text, already checked against the schema).
    pub args: &'a str,
}

/// The same frames over a blocking socket, for the exchanges made outside an async runtime:
/// reading a plugin's manifest while it is loaded, and the worker's side of every call.
#[derive(Debug)]
pub struct BlockingChannel {
    reader: FrameReader,
    writer: FrameWriter,
}

impl BlockingChannel {
    /// Frames over `stream`.
    ///
    /// # Errors
    ///
    /// The socket could not be duplicated for the writing half.
    pub fn new(stream: UnixStream) -> std::io::Result<BlockingChannel> {
        Ok(BlockingChannel {
            writer: FrameWriter::new(stream.try_clone()?),
            reader: FrameReader::new(stream),
        })
    }

    /// Sends one message.
    ///
    /// # Errors
    ///
    /// The socket failed.
    pub fn send<T: Serialize>(&mut self, message: &T) -> std::io::Result<()> {
        self.writer.send(message)
    }

    /// Receives one message (blocking, up to the socket's read time-out).
    ///
    /// # Errors
    ///
    /// The socket failed or closed, or the frame is not a message.
    pub fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<T> {
        self.reader.recv()
    }

    /// The socket, e.g. to set its time-outs.
    pub fn stream(&self) -> &UnixStream {
        &self.reader.stream
    }

    /// The two halves, to read on one thread while others write.
    pub fn split(self) -> (FrameReader, FrameWriter) {
        (self.reader, self.writer)
    }
}

/// The reading half of a [`BlockingChannel`].
#[derive(Debug)]
pub struct FrameReader {
    stream: UnixStream,
    codec: LengthDelimitedCodec,
    buffer: BytesMut,
}

impl FrameReader {
    fn new(stream: UnixStream) -> FrameReader {
        FrameReader {
            stream,
            codec: codec(),
            buffer: BytesMut::new(),
        }
    }

    /// Receives one message (blocking, up to the socket's read time-out).
    ///
    /// # Errors
    ///
    /// The socket failed or closed, or the frame is not a message.
    pub fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<T> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.buffer)? {
                return decode(&frame).map_err(std::io::Error::other);
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }

    /// Receives one message if one has begun to arrive (`Ok(None)`: nothing waits in the
    /// socket), reading exactly its bytes and none of the next frame's. So whatever follows
    /// stays in the socket and keeps it readable: the next thread waiting for it is woken
    /// (the worker's serving threads, `crate::worker`), where bytes read ahead into this
    /// buffer would wake nobody.
    ///
    /// # Errors
    ///
    /// The socket failed or closed, or the frame is too long or not a message.
    pub fn recv_waiting<T: DeserializeOwned>(&mut self) -> std::io::Result<Option<T>> {
        if !self.buffer.is_empty() {
            return self.recv().map(Some);
        }
        // The codec's header: the payload's length, 4 bytes big-endian ([`codec`]).
        let mut head = [0u8; 4];
        let n = match rustix::net::recv(&self.stream, &mut head, rustix::net::RecvFlags::DONTWAIT) {
            Ok((n, _)) => n,
            Err(rustix::io::Errno::AGAIN) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.stream.read_exact(&mut head[n..])?;
        let length = u32::from_be_bytes(head) as usize;
        self.buffer.reserve(4 + length.min(MAX_FRAME));
        self.buffer.extend_from_slice(&head);
        if length <= MAX_FRAME {
            self.buffer.resize(4 + length, 0);
            self.stream.read_exact(&mut self.buffer[4..])?;
        }
        // The codec checks the length against its limit and takes the frame out.
        match self.codec.decode(&mut self.buffer)? {
            Some(frame) => decode(&frame).map(Some).map_err(std::io::Error::other),
            None => Err(std::io::Error::other("a frame ended early")),
        }
    }
}

/// The writing half of a [`BlockingChannel`]: one frame per [`FrameWriter::send`], written
/// whole.
#[derive(Debug)]
pub struct FrameWriter {
    stream: UnixStream,
    codec: LengthDelimitedCodec,
    frame: BytesMut,
}

impl FrameWriter {
    fn new(stream: UnixStream) -> FrameWriter {
        FrameWriter {
            stream,
            codec: codec(),
            frame: BytesMut::new(),
        }
    }

    /// Sends one message.
    ///
    /// # Errors
    ///
    /// The socket failed.
    pub fn send<T: Serialize>(&mut self, message: &T) -> std::io::Result<()> {
        self.frame.clear();
        self.codec.encode(encode(message), &mut self.frame)?;
        self.stream.write_all(&self.frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_call_is_the_same_frame_as_an_owned_one() {
        let limits = Limits::default();
        let args = r#"{"path":"a \"b\".txt"}"#;
        for create_only in [Vec::new(), vec!["a \"b\".txt".to_owned()]] {
            let borrowed = encode(&CallFrame::Call {
                id: 7,
                limits,
                create_only: &create_only,
                args,
            });
            let owned = encode(&ToWorker::Call {
                id: 7,
                limits,
                create_only: create_only.clone(),
                args: args.to_owned(),
            });
            assert_eq!(borrowed, owned);
            let Ok(ToWorker::Call {
                id,
                args: back,
                create_only: only,
                ..
            }) = decode::<ToWorker>(&borrowed)
            else {
                panic!("not a call");
            };
            assert_eq!((id, back.as_str(), only), (7, args, create_only));
        }
    }

    fn cancel(id: u64) -> Vec<u8> {
        let mut frame = BytesMut::new();
        codec()
            .encode(encode(&ToWorker::Cancel { id }), &mut frame)
            .expect("encode");
        frame.to_vec()
    }

    fn readable(stream: &UnixStream) -> bool {
        let mut fds = [rustix::event::PollFd::new(
            stream,
            rustix::event::PollFlags::IN,
        )];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        rustix::event::poll(&mut fds, Some(&zero)).expect("poll") == 1
    }

    #[test]
    fn a_waiting_frame_is_read_alone_and_the_next_stays_in_the_socket() {
        let (mut server, worker) = UnixStream::pair().expect("socketpair");
        let watched = worker.try_clone().expect("dup");
        let (mut reader, _writer) = BlockingChannel::new(worker).expect("channel").split();
        assert!(
            reader.recv_waiting::<ToWorker>().expect("empty").is_none(),
            "nothing waits"
        );
        let two = [cancel(1), cancel(2)].concat();
        server.write_all(&two).expect("two frames in one write");
        assert!(matches!(
            reader.recv_waiting::<ToWorker>(),
            Ok(Some(ToWorker::Cancel { id: 1 }))
        ));
        assert!(
            readable(&watched),
            "the second frame still makes the socket readable"
        );
        assert!(matches!(
            reader.recv_waiting::<ToWorker>(),
            Ok(Some(ToWorker::Cancel { id: 2 }))
        ));
        assert!(!readable(&watched));
        assert!(reader.recv_waiting::<ToWorker>().expect("empty").is_none());
        drop(server);
        let closed = reader.recv_waiting::<ToWorker>().map(|_| ());
        assert_eq!(
            closed.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::UnexpectedEof)
        );
    }

    #[test]
    fn a_waiting_frame_over_the_limit_cut_short_or_not_a_message_is_refused() {
        let (mut server, worker) = UnixStream::pair().expect("socketpair");
        let (mut reader, _writer) = BlockingChannel::new(worker).expect("channel").split();
        let too_long = u32::try_from(MAX_FRAME + 1).expect("fits").to_be_bytes();
        server.write_all(&too_long).expect("write");
        assert!(reader.recv_waiting::<ToWorker>().is_err());

        let (mut server, worker) = UnixStream::pair().expect("socketpair");
        let (mut reader, _writer) = BlockingChannel::new(worker).expect("channel").split();
        let mut frame = BytesMut::new();
        codec()
            .encode(Bytes::from_static(b"{\"Nope\":1}"), &mut frame)
            .expect("encode");
        server.write_all(&frame).expect("write");
        assert!(reader.recv_waiting::<ToWorker>().is_err());

        // A frame whose sender closes before its payload is whole.
        let (mut server, worker) = UnixStream::pair().expect("socketpair");
        let (mut reader, _writer) = BlockingChannel::new(worker).expect("channel").split();
        server.write_all(&10u32.to_be_bytes()).expect("write");
        server.write_all(b"{\"Ca").expect("write");
        drop(server);
        let cut = reader.recv_waiting::<ToWorker>().map(|_| ());
        assert_eq!(
            cut.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::UnexpectedEof)
        );
    }
}
