//! The accept loop on loopback, as the host runs it: a router served with [`HttpLimits`], its
//! connections reported to a [`ConnectionMetrics`], and a graceful shutdown.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{routing::get, Router};
use rojos_http_server::{run, CloseReason, ConnectionMetrics, HttpLimits};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot, Notify},
    task::JoinHandle,
};

/// What the loop reported: connections open now, and every close with its reason.
#[derive(Debug, Default)]
struct Counted {
    open: Arc<AtomicUsize>,
    closed: Mutex<Vec<CloseReason>>,
}

/// One connection counted open until dropped.
#[derive(Debug)]
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ConnectionMetrics for Counted {
    type Open = Open;

    fn open_connection(&self) -> Open {
        self.open.fetch_add(1, Ordering::SeqCst);
        Open(Arc::clone(&self.open))
    }

    fn connection_closed(&self, reason: CloseReason) {
        self.closed.lock().unwrap().push(reason);
    }
}

/// A server under test: `GET /hold` tells `entered` and answers `done` once `release` is
/// notified; `GET /` answers `ok` at once.
struct Served {
    address: std::net::SocketAddr,
    metrics: Arc<Counted>,
    entered: mpsc::UnboundedReceiver<()>,
    release: Arc<Notify>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
}

async fn serve(limits: HttpLimits) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (entered_tx, entered) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let held = Arc::clone(&release);
    let router = Router::new().route("/", get(|| async { "ok" })).route(
        "/hold",
        get(move || {
            let entered = entered_tx.clone();
            let release = Arc::clone(&held);
            async move {
                // Waiting before it tells: a release right after cannot be missed.
                let released = release.notified();
                tokio::pin!(released);
                released.as_mut().enable();
                entered.send(()).unwrap();
                released.await;
                "done"
            }
        }),
    );
    let metrics = Arc::new(Counted::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(run(
        listener,
        router,
        limits,
        Arc::clone(&metrics),
        async move {
            let _ = stopped.await;
        },
    ));
    Served {
        address,
        metrics,
        entered,
        release,
        stop,
        server,
    }
}

fn limits(max_connections: usize, idle_timeout: Duration) -> HttpLimits {
    HttpLimits {
        max_connections,
        idle_timeout,
        header_read_timeout: Duration::from_secs(3600),
        stream_write_timeout: Duration::from_secs(3600),
    }
}

async fn request(address: std::net::SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Everything the server sends until it closes the connection.
async fn read_all(mut stream: TcpStream) -> String {
    let mut bytes = Vec::new();
    // A reset after some bytes still leaves those bytes read.
    let _ = stream.read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn at_the_limit_with_every_connection_in_a_request_a_new_one_is_refused_and_counted() {
    let mut served = serve(limits(1, Duration::from_secs(3600))).await;
    let held = request(served.address, "/hold").await;
    served.entered.recv().await.unwrap();

    let refused = read_all(TcpStream::connect(served.address).await.unwrap()).await;
    assert!(refused.starts_with("HTTP/1.1 503 "), "{refused}");
    assert!(refused.contains("retry-after: 1\r\n"), "{refused}");
    assert!(
        refused.ends_with(
            "{\"error\":\"the server is at its limit of 1 connections; try again shortly\"}"
        ),
        "{refused}"
    );

    served.release.notify_one();
    served.stop.send(()).unwrap();
    let answered = read_all(held).await;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    assert!(answered.ends_with("done"), "{answered}");
    served.server.await.unwrap().unwrap();
    assert_eq!(
        *served.metrics.closed.lock().unwrap(),
        [CloseReason::Refused]
    );
    assert_eq!(served.metrics.open.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_keep_alive_connection_with_no_request_is_closed_as_idle() {
    let served = serve(limits(16, Duration::from_millis(100))).await;
    let answered = read_all(request(served.address, "/").await).await;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    assert!(answered.ends_with("ok"), "{answered}");

    served.stop.send(()).unwrap();
    served.server.await.unwrap().unwrap();
    assert_eq!(*served.metrics.closed.lock().unwrap(), [CloseReason::Idle]);
    assert_eq!(served.metrics.open.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn at_shutdown_a_request_in_progress_gets_its_whole_response_and_a_waiting_connection_closes()
{
    let mut served = serve(limits(16, Duration::from_secs(3600))).await;
    let held = request(served.address, "/hold").await;
    served.entered.recv().await.unwrap();
    // Admitted once the request after it is: connections are accepted in order.
    let waiting = TcpStream::connect(served.address).await.unwrap();
    let second = request(served.address, "/hold").await;
    served.entered.recv().await.unwrap();

    served.stop.send(()).unwrap();
    assert_eq!(
        read_all(waiting).await,
        "",
        "a connection with no request closes at once"
    );
    served.release.notify_waiters();
    for stream in [held, second] {
        let answered = read_all(stream).await;
        assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
        assert!(answered.ends_with("done"), "{answered}");
    }
    served.server.await.unwrap().unwrap();
    assert!(served.metrics.closed.lock().unwrap().is_empty());
    assert_eq!(served.metrics.open.load(Ordering::SeqCst), 0);
}
