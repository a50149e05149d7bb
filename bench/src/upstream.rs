//! The scripted OpenAI-compatible upstream: `POST /v1/chat/completions` on loopback, answering
//! the docs/intro conversation in the Chat Completions SSE wire format (the same bytes as the
//! end-to-end tests' `ScriptedUpstream`), its final answer in the reference conversation's 6 content deltas or,
//! with `--answer-chunks`, in token-sized ones ([`Answer`]). Stateless: the turn is chosen by
//! counting the `tool` messages in the request, so any number of conversations can run at once.
//! The pace (time to first byte, time between chunks) can be changed between scenarios; each
//! chunk is due at a fixed time from the request's arrival, as a provider's tokens are (a chunk
//! this process sends late does not push the later ones back), and how late each turn's last
//! chunk was is recorded ([`Upstream::lateness`]): the part of a scenario's latency that is
//! this machine starving the upstream, not the host. The conversation and its turns are
//! `script`'s. Under `/abuse/{misbehaviour}/v1` it misbehaves instead, for the abuse scenario
//! (`abuse`): a turn of [`FLOOD_CALLS`] tool calls, or one SSE `data:` line of
//! [`HUGE_LINE_BYTES`]. Under `/long/v1` it plays S4's long conversation
//! (`long`), under `/first-use/v1` one call of every offered tool (`first_use`, for the idle
//! memory).

mod abuse;
mod chunks;
mod first_use;
mod long;
mod script;

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
    serve::ListenerExt,
    Router,
};
use futures_util::stream;

use abuse::{huge_line, tool_flood};
pub(crate) use abuse::{Misbehaviour, FLOOD_CALLS, FLOOD_FILE, HUGE_LINE_BYTES};
use chunks::text;
pub(crate) use chunks::MODEL;
pub(crate) use long::{long_file, LONG_FILE, LONG_WINDOW_TOKENS};
use script::deep_check;
pub(crate) use script::{
    answer, choose_answer, chosen_answer, direct_request, Answer, Pace, Script, ANSWER, FILE,
    FOLDER, MESSAGE, PAGE,
};

/// The model name of S4's run with a tokenizer: one of OpenAI's, so the host counts
/// requests with `o200k_base`.
pub(crate) const TOKENIZED_MODEL: &str = "gpt-4o";
/// Requests to the misbehaving routes may be this large (the flood's second request carries
/// every tool result).
const MISBEHAVING_BODY_LIMIT: usize = 1 << 30;

#[derive(Debug)]
struct Shared {
    script: Script,
    first_us: AtomicU64,
    between_us: AtomicU64,
    requests: AtomicU64,
    refused: AtomicU64,
    /// Request body bytes received under `/long/v1`.
    long_bytes: AtomicU64,
    /// Of which in requests for a summary.
    long_summary_bytes: AtomicU64,
    /// Requests under `/long/v1` over [`LONG_WINDOW_TOKENS`] (four bytes a token).
    long_over_window: AtomicU64,
    /// How late each paced turn's last chunk was sent, in microseconds.
    lateness_us: Mutex<Vec<u64>>,
}

/// A running upstream.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
    /// `http://127.0.0.1:PORT`.
    root: String,
    shared: Arc<Shared>,
}

impl Upstream {
    /// Starts serving on an ephemeral loopback port.
    pub(crate) async fn start() -> anyhow::Result<Upstream> {
        let shared = Arc::new(Shared {
            script: Script::seed(answer()),
            first_us: AtomicU64::new(0),
            between_us: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            long_bytes: AtomicU64::new(0),
            long_summary_bytes: AtomicU64::new(0),
            long_over_window: AtomicU64::new(0),
            lateness_us: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route(
                "/abuse/{misbehaviour}/v1/chat/completions",
                post(misbehave).layer(DefaultBodyLimit::max(MISBEHAVING_BODY_LIMIT)),
            )
            .route(
                "/long/v1/chat/completions",
                post(long_completions).layer(DefaultBodyLimit::max(MISBEHAVING_BODY_LIMIT)),
            )
            .route(
                "/first-use/v1/chat/completions",
                post(first_use_completions),
            )
            .with_state(Arc::clone(&shared));
        // A provider's server does not drop S3's burst of new connections: neither does this
        // one (the host's backlog, not tokio's default of 128).
        let listener = rojos::listen(([127, 0, 0, 1], 0).into())?;
        let root = format!("http://{}", listener.local_addr()?);
        let base_url = format!("{root}/v1");
        // Providers' servers send each SSE event at once; so does this one.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("rojos-bench: the scripted upstream stopped: {e}");
            }
        });
        Ok(Upstream {
            base_url,
            root,
            shared,
        })
    }

    /// The base URL under which the upstream misbehaves as `misbehaviour`.
    pub(crate) fn misbehaving_url(&self, misbehaviour: Misbehaviour) -> String {
        format!("{}/abuse/{}/v1", self.root, misbehaviour.slug())
    }

    /// The base URL under which the upstream plays S4's long conversation.
    pub(crate) fn long_url(&self) -> String {
        format!("{}/long/v1", self.root)
    }

    /// The base URL under which the upstream calls every offered tool once, then answers.
    pub(crate) fn first_use_url(&self) -> String {
        format!("{}/first-use/v1", self.root)
    }

    /// Request body bytes received under [`Upstream::long_url`] so far.
    pub(crate) fn long_bytes(&self) -> u64 {
        self.shared.long_bytes.load(Ordering::Relaxed)
    }

    /// Of [`Upstream::long_bytes`], those of requests for a summary.
    pub(crate) fn long_summary_bytes(&self) -> u64 {
        self.shared.long_summary_bytes.load(Ordering::Relaxed)
    }

    /// Requests under [`Upstream::long_url`] over [`LONG_WINDOW_TOKENS`] so far.
    pub(crate) fn long_over_window(&self) -> u64 {
        self.shared.long_over_window.load(Ordering::Relaxed)
    }

    /// Sets the pace of every turn from now on.
    pub(crate) fn set_pace(&self, pace: Pace) {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.shared
            .first_us
            .store(micros(pace.first), Ordering::Relaxed);
        self.shared
            .between_us
            .store(micros(pace.between), Ordering::Relaxed);
    }

    /// How late each paced turn's last chunk was sent since the last call (which empties the
    /// record): the upstream's own delay under the scenario's load.
    pub(crate) fn lateness(&self) -> Vec<Duration> {
        let lateness = std::mem::take(
            &mut *self
                .shared
                .lateness_us
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        lateness.into_iter().map(Duration::from_micros).collect()
    }

    /// The script's own time for one conversation at `pace`.
    pub(crate) fn own_time(&self, pace: Pace) -> Duration {
        self.shared.script.own_time(pace)
    }

    /// Requests served, and requests refused as malformed (never expected).
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.shared.requests.load(Ordering::Relaxed),
            self.shared.refused.load(Ordering::Relaxed),
        )
    }
}

/// Counts the non-overlapping occurrences of `needle` in `haystack`.
fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

async fn completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let n = shared.requests.fetch_add(1, Ordering::Relaxed);
    // Counting bytes keeps the upstream cheap; every 64th request is checked in depth.
    let tools = count(&body, br#""role":"tool""#);
    let checked = n % 64 != 0 || deep_check(&body, tools).is_ok();
    if tools > 2 || !checked || count(&body, br#""stream":true"#) != 1 {
        shared.refused.fetch_add(1, Ordering::Relaxed);
        let why = deep_check(&body, tools).err().unwrap_or_default();
        return (StatusCode::BAD_REQUEST, format!("bench upstream: {why}")).into_response();
    }
    let arrived = tokio::time::Instant::now();
    let events = shared.script.turns[tools].clone();
    let first = Duration::from_micros(shared.first_us.load(Ordering::Relaxed));
    let between = Duration::from_micros(shared.between_us.load(Ordering::Relaxed));
    let body = if first.is_zero() && between.is_zero() {
        Body::from_stream(stream::iter(
            events.into_iter().map(Ok::<_, std::convert::Infallible>),
        ))
    } else {
        let last = events.len().saturating_sub(1);
        Body::from_stream(stream::unfold(
            events.into_iter().enumerate(),
            move |mut events| {
                let shared = Arc::clone(&shared);
                async move {
                    let (i, event) = events.next()?;
                    let due = arrived + first + between * u32::try_from(i).unwrap_or(u32::MAX);
                    tokio::time::sleep_until(due).await;
                    if i == last {
                        let late = u64::try_from(due.elapsed().as_micros()).unwrap_or(u64::MAX);
                        shared
                            .lateness_us
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(late);
                    }
                    Some((Ok::<_, std::convert::Infallible>(event), events))
                }
            },
        ))
    };
    sse(body)
}

fn sse(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The misbehaving routes: the turn comes at once, as fast as the host reads it.
async fn misbehave(Path(slug): Path<String>, body: Bytes) -> Response {
    let events = match Misbehaviour::from_slug(&slug) {
        Some(Misbehaviour::ToolFlood) if contains(&body, br#""role":"tool""#) => text(ANSWER),
        Some(Misbehaviour::ToolFlood) => tool_flood(),
        Some(Misbehaviour::HugeLine) => huge_line(),
        None => return (StatusCode::NOT_FOUND, "no such misbehaviour").into_response(),
    };
    at_once(events)
}

/// S4's turns, chosen by the request's last message; its bytes counted.
async fn long_completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    shared
        .long_bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    if body.len() as u64 / 4 > LONG_WINDOW_TOKENS {
        shared.long_over_window.fetch_add(1, Ordering::Relaxed);
    }
    match long::answer(&body) {
        Ok((events, summary)) => {
            if summary {
                shared
                    .long_summary_bytes
                    .fetch_add(body.len() as u64, Ordering::Relaxed);
            }
            at_once(events)
        }
        Err(why) => (StatusCode::BAD_REQUEST, format!("bench upstream: {why}")).into_response(),
    }
}

/// One call of every tool the request offers, then a short answer.
async fn first_use_completions(body: Bytes) -> Response {
    match first_use::answer(&body) {
        Ok(events) => at_once(events),
        Err(why) => (StatusCode::BAD_REQUEST, format!("bench upstream: {why}")).into_response(),
    }
}

/// An SSE response of `events`, sent as fast as the host reads them.
fn at_once(events: Vec<Bytes>) -> Response {
    sse(Body::from_stream(stream::iter(
        events.into_iter().map(Ok::<_, std::convert::Infallible>),
    )))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each chunk is due at a fixed time from the request's arrival: a bench that could not
    /// send for a while catches up instead of pushing every later chunk back, and the last
    /// chunk's lateness is recorded once per turn.
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_upstream_catches_up_with_its_schedule() {
        let upstream = Upstream::start().await.unwrap();
        let between = Duration::from_millis(100);
        upstream.set_pace(Pace {
            first: between,
            between,
        });
        let chunks = Script::seed(&Answer::seed()).turns[0].len();
        let scripted = between * u32::try_from(chunks).unwrap();
        let started = std::time::Instant::now();
        let response = reqwest::Client::new()
            .post(format!("{}/chat/completions", upstream.base_url))
            .json(&direct_request(0))
            .send()
            .await
            .unwrap();
        // The whole runtime, the upstream's with it, stalls for the turn's scripted time.
        std::thread::sleep(scripted);
        let body = response.bytes().await.unwrap();
        let took = started.elapsed();
        assert_eq!(count(&body, b"data: "), chunks);
        // Paced from each chunk's send instead, the last would come `chunks - 1` paces late.
        assert!(took < scripted + between * 3, "{took:?} for {scripted:?}");
        let late = upstream.lateness();
        assert_eq!(late.len(), 1, "one turn, one record: {late:?}");
        assert!(late[0] < between * 3, "{late:?}");
        assert!(upstream.lateness().is_empty(), "reading empties the record");
    }

    #[test]
    fn tool_messages_pick_the_turn() {
        for tools in 0..3 {
            let body = serde_json::to_vec(&direct_request(tools)).unwrap();
            assert_eq!(count(&body, br#""role":"tool""#), tools);
        }
    }
}
