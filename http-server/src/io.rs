//! A connection's socket as the server reads and writes it: reads tell the connection's
//! bookkeeping that a request head has begun, and a write that stays blocked (the client reads
//! nothing) for `stream_write_timeout` fails with `TimedOut`, which closes the connection.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::{Instant, Sleep},
};

use super::connections::{CloseReason, Connection};

/// A TCP stream whose writes may not stall for longer than a limit.
#[derive(Debug)]
pub(super) struct WatchedStream {
    inner: TcpStream,
    connection: Arc<Connection>,
    write_timeout: Duration,
    /// Armed while writes are blocked; created at the first stall and reused.
    stall: Option<Pin<Box<Sleep>>>,
    stalled: bool,
}

impl WatchedStream {
    pub(super) fn new(
        inner: TcpStream,
        connection: Arc<Connection>,
        write_timeout: Duration,
    ) -> WatchedStream {
        WatchedStream {
            inner,
            connection,
            write_timeout,
            stall: None,
            stalled: false,
        }
    }

    /// Passes a write's outcome on; a write blocked for longer than the limit becomes an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = false;
            return poll;
        }
        let deadline = Instant::now() + self.write_timeout;
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.stalled {
            self.stalled = true;
            stall.as_mut().reset(deadline);
        }
        if stall.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.connection.close(CloseReason::WriteTimeout);
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read nothing for {} s",
                self.write_timeout.as_secs_f64()
            ),
        )))
    }
}

impl AsyncRead for WatchedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.connection.bytes_read();
        }
        poll
    }
}

impl AsyncWrite for WatchedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// A TCP stream has nothing to flush (always ready): it must not end a stall either.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
