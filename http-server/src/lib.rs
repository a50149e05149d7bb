//! The accept loop of the rojos server: serves an axum router over HTTP/1.1 on each accepted
//! connection ([`run`]), with the `[server]` protections against slow and idle clients (see
//! docs/configuration.md): a request head must be complete within `header_read_timeout`, a
//! keep-alive connection with no request for `idle_timeout` is closed, a client that reads
//! nothing of its response for `stream_write_timeout` is disconnected, and at
//! `max_connections` the connection that has waited longest without a request makes room. At
//! shutdown it stops accepting, closes the connections waiting for a request and lets those in
//! a request finish their response.
//!
//! `axum::serve` exposes none of hyper's connection settings, hence this loop. hyper's own
//! `header_read_timeout` is left off: in hyper 1.x it also bounds the wait for the next request
//! on a keep-alive connection, which would make `idle_timeout` the smaller of the two.
//!
//! The crate knows no route, config file or metrics registry: the host passes in its router,
//! the [`HttpLimits`] it read from `[server]`, and its metrics as a [`ConnectionMetrics`].
//!
//! # Layout
//!
//! - this file: [`run`], the loop, each connection's task and the service that tracks its
//!   requests.
//! - `limits`: [`HttpLimits`], the `[server]` time-outs and connection cap.
//! - `metrics`: [`ConnectionMetrics`], what the loop counts for the host's `/metrics`.
//! - `connections`: the open connections' bookkeeping: which are in a request, when each must
//!   close, which one makes room; [`CloseReason`].
//! - `io`: a connection's socket, which tells the bookkeeping of reads and times out a
//!   write the client does not read.

mod connections;
mod io;
mod limits;
mod metrics;

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{body::Body, Router};
use hyper::{
    body::{Frame, Incoming, SizeHint},
    server::conn::http1,
    service::{service_fn, Service as _},
    Request, Response,
};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::connections::{Connection, Connections, Next, RequestInProgress};
pub use self::{connections::CloseReason, limits::HttpLimits, metrics::ConnectionMetrics};

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting, closes
/// connections that wait for a request, lets those in a request finish their response, and
/// returns once every connection is closed.
///
/// # Errors
///
/// None so far: failed accepts are logged and retried, as `axum::serve` does.
pub async fn run<M: ConnectionMetrics>(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    metrics: Arc<M>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let server = Arc::new(Server {
        router,
        connections: Arc::new(Connections::new(limits)),
        write_timeout: limits.stream_write_timeout,
        metrics,
        shutdown: CancellationToken::new(),
    });
    let tasks = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    wait_after_accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        server.accept(stream, &tasks);
    }
    drop(listener);
    server.shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// What every connection task shares.
struct Server<M> {
    router: Router,
    connections: Arc<Connections>,
    write_timeout: Duration,
    metrics: Arc<M>,
    /// Cancelled when the server stops accepting.
    shutdown: CancellationToken,
}

impl<M: ConnectionMetrics> Server<M> {
    fn accept(self: &Arc<Self>, stream: TcpStream, tasks: &TaskTracker) {
        // Without TCP_NODELAY, an event written right after the response headers waits for the
        // client's delayed ACK (Nagle): about 40 ms on every chat (measured by rojos-bench).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let Some(connection) = self.connections.admit() else {
            self.refuse(&stream);
            return;
        };
        let server = Arc::clone(self);
        tasks.spawn(async move {
            let _open = server.metrics.open_connection();
            let closed = server.serve(stream, &connection).await;
            server.connections.release(&connection);
            if let Some(reason) = closed {
                tracing::debug!(reason = reason.label(), "connection closed by the server");
                server.metrics.connection_closed(reason);
            }
        });
    }

    /// Every connection is in a request: answer `503` without reading anything, and close.
    /// The write cannot block (the socket's send buffer is empty), so a flood of connections
    /// costs the loop no waiting; a client that already sent its request may see a reset.
    fn refuse(&self, stream: &TcpStream) {
        let body = format!(
            "{{\"error\":\"the server is at its limit of {} connections; try again shortly\"}}",
            self.connections.max()
        );
        let response = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nx-content-type-options: nosniff\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.try_write(response.as_bytes());
        // Debug, not warn: a flood would otherwise flood the log too; the metric counts them.
        tracing::debug!(
            max_connections = self.connections.max(),
            "connection refused: every connection is in a request"
        );
        self.metrics.connection_closed(CloseReason::Refused);
    }

    /// Serves one connection until it ends; returns why the server closed it, if it did.
    async fn serve(&self, stream: TcpStream, connection: &Arc<Connection>) -> Option<CloseReason> {
        let io = io::WatchedStream::new(stream, Arc::clone(connection), self.write_timeout);
        let service = self.service(connection);
        let mut builder = http1::Builder::new();
        // Off: our own deadlines apply (see the module doc); without a timer hyper would
        // otherwise warn about its default on every connection.
        builder.header_read_timeout(None);
        let http = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(http);
        let mut draining = false;
        loop {
            let deadline = match self.connections.next(connection) {
                Next::Close(reason) => return Some(reason),
                Next::CloseAt(_) if draining => return None,
                Next::CloseAt(at) => Some(at),
                Next::Serve => None,
            };
            tokio::select! {
                result = http.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return connection.closing();
                }
                () = connection.changed() => {}
                () = sleep_until(deadline) => {}
                () = self.shutdown.cancelled(), if !draining => {
                    // A connection in a request finishes its response, then closes; one
                    // waiting for a request closes at once (next turn of the loop).
                    draining = true;
                    http.as_mut().graceful_shutdown();
                }
            }
        }
    }

    /// The router, with each request counted on `connection` until its response body ends.
    fn service(
        &self,
        connection: &Arc<Connection>,
    ) -> impl hyper::service::Service<
        Request<Incoming>,
        Response = Response<TrackedBody>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<TrackedBody>, Infallible>> + Send,
    > + Send {
        let app = TowerToHyperService::new(self.router.clone());
        let connections = Arc::clone(&self.connections);
        let connection = Arc::clone(connection);
        service_fn(move |request: Request<Incoming>| {
            let request_in_progress = connections.begin_request(&connection);
            let response = app.call(request);
            async move {
                let response = response.await?;
                Ok(response.map(|body| TrackedBody {
                    body,
                    _request: request_in_progress,
                }))
            }
        })
    }
}

/// `deadline`, or never.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// After a failed accept: go on at once when only that connection failed; otherwise (out of
/// file descriptors, ...) pause a second so the loop does not spin.
async fn wait_after_accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A response body that keeps its request in progress until it is finished or dropped.
#[derive(Debug)]
struct TrackedBody {
    body: Body,
    _request: RequestInProgress,
}

impl hyper::body::Body for TrackedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
