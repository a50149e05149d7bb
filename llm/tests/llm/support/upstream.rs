//! `ScriptedUpstream`: an axum server on 127.0.0.1:0 standing in for
//! `POST …/chat/completions`. It answers one scripted reply per request (and fails loudly
//! when none is left), streams bytes in chunks with pauses, can cut the connection, send only
//! keep-alives, or answer an error status; it records every request and notices when the
//! client goes away.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures_util::stream::{self, StreamExt};
use serde_json::Value;
use tokio::sync::Notify;

use super::expect::fixture;

/// How a streamed reply ends.
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// The body ends normally.
    Close,
    /// The connection is aborted (no terminating chunk), 50 ms after the last part.
    Cut,
    /// Keep-alive comments every `every`, `count` times, then a cut.
    KeepAlive { every: Duration, count: usize },
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// `200 text/event-stream`: the parts with a pause before each, then `end`.
    Sse {
        parts: Vec<Bytes>,
        pause: Duration,
        end: End,
    },
    /// Any status with headers and a body.
    Status {
        code: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// `200 application/json`.
    Json(Value),
}

impl Reply {
    /// A fixture served in `chunk`-byte pieces, 1 ms apart.
    pub(crate) fn fixture(name: &str, chunk: usize) -> Reply {
        let bytes = fixture(name);
        Reply::Sse {
            parts: bytes.chunks(chunk).map(Bytes::copy_from_slice).collect(),
            pause: Duration::from_millis(1),
            end: End::Close,
        }
    }

    /// SSE text served as one part, then `end`.
    pub(crate) fn sse(text: &str, end: End) -> Reply {
        Reply::Sse {
            parts: vec![Bytes::copy_from_slice(text.as_bytes())],
            pause: Duration::ZERO,
            end,
        }
    }

    /// An error status with a body.
    pub(crate) fn status(code: u16, body: &str) -> Reply {
        Reply::Status {
            code,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    /// Adds a header to a `Status` reply.
    pub(crate) fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name, value.to_string()));
        }
        self
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    unexpected: AtomicUsize,
    body_dropped: AtomicBool,
    dropped: Notify,
}

/// The running upstream; stops when dropped.
pub(crate) struct ScriptedUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedUpstream {
    /// Starts a server that answers `replies` in order.
    pub(crate) async fn start(replies: Vec<Reply>) -> ScriptedUpstream {
        let state = Arc::new(State::default());
        state.replies.lock().unwrap().extend(replies);
        let app_state = Arc::clone(&state);
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = Arc::clone(&app_state);
            async move { answer(state, uri, headers, body) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ScriptedUpstream { addr, state, task }
    }

    /// `http://127.0.0.1:PORT/v1/` (with a trailing slash on purpose).
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1/", self.addr)
    }

    /// `127.0.0.1:PORT`, as errors name it.
    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// How many scripted replies are still unused.
    pub(crate) fn remaining(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }

    /// Fails unless every reply was used and no request came unscripted.
    pub(crate) fn assert_consumed(&self) {
        assert_eq!(self.remaining(), 0, "scripted replies left unused");
        assert_eq!(
            self.state.unexpected.load(Ordering::SeqCst),
            0,
            "requests beyond the script"
        );
    }

    /// Waits until a streamed body was dropped by the server (the client went away).
    pub(crate) async fn body_dropped(&self) {
        loop {
            let notified = self.state.dropped.notified();
            if self.state.body_dropped.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(state: Arc<State>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        headers,
        body,
    });
    let Some(reply) = state.replies.lock().unwrap().pop_front() else {
        state.unexpected.fetch_add(1, Ordering::SeqCst);
        return plain(500, "{\"error\":{\"message\":\"no scripted reply left\"}}");
    };
    match reply {
        Reply::Status {
            code,
            headers,
            body,
        } => {
            let mut response = plain(code, &body);
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Reply::Json(value) => {
            let mut response = plain(200, &value.to_string());
            response
                .headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            response
        }
        Reply::Sse { parts, pause, end } => sse_response(state, parts, pause, end),
    }
}

fn plain(code: u16, body: &str) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::from_u16(code).unwrap();
    response
}

/// Signals the upstream when the body stream is dropped (done, or the client left).
struct DropGuard(Arc<State>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.body_dropped.store(true, Ordering::SeqCst);
        self.0.dropped.notify_waiters();
    }
}

fn sse_response(state: Arc<State>, parts: Vec<Bytes>, pause: Duration, end: End) -> Response {
    let guard = Arc::new(DropGuard(state));
    let data = stream::iter(parts).then(move |part| async move {
        tokio::time::sleep(pause).await;
        Ok::<Bytes, std::io::Error>(part)
    });
    let tail = match end {
        End::Close => stream::empty().boxed(),
        // Give hyper time to flush what came before, so the cut lands after it.
        End::Cut => stream::once(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(std::io::Error::other("scripted cut"))
        })
        .boxed(),
        End::KeepAlive { every, count } => stream::iter(0..count)
            .then(move |_| async move {
                tokio::time::sleep(every).await;
                Ok(Bytes::from_static(b": keep-alive\n\n"))
            })
            .chain(stream::once(async {
                Err(std::io::Error::other("scripted cut"))
            }))
            .boxed(),
    };
    let body = data.chain(tail).map(move |item| {
        let _keep = &guard;
        item
    });
    let mut response = Response::new(Body::from_stream(body));
    response
        .headers_mut()
        .insert("content-type", "text/event-stream".parse().unwrap());
    response
}
