//! The scripted OpenAI-compatible upstream: `POST /v1/chat/completions` on loopback, answering
//! the docs/intro conversation in the Chat Completions SSE wire format (the same bytes as the
//! end-to-end tests' `ScriptedUpstream`), its final answer in the reference conversation's 6 content deltas or,
//! with `--answer-chunks`, in token-sized ones ([`Answer`]). Stateless: the turn is chosen by
//! counting the `tool` messages in the request, so any number of conversations can run at once.
//! The pace (time to first byte, time between chunks) can be changed between scenarios; each
//! chunk is due at a fixed time from the request's arrival, as a provider's tokens are (a chunk
//! this process sends late does not push the later ones back), and how late each turn's last
//! chunk was is recorded ([`Upstream::lateness`]): the part of a scenario's latency that is
//! this machine starving the upstream, not the host. Under `/abuse/{misbehaviour}/v1` it
//! misbehaves instead, for the abuse scenario: a turn of [`FLOOD_CALLS`] tool calls, or one SSE
//! `data:` line of [`HUGE_LINE_BYTES`]. Under `/long/v1` it plays S4's long conversation
//! (`long`), under `/first-use/v1` one call of every offered tool (`first_use`, for the idle
//! memory).

mod chunks;
mod first_use;
mod long;

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, LazyLock, Mutex, OnceLock, PoisonError,
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
use serde_json::{json, Value};

pub(crate) use chunks::MODEL;
use chunks::{chunk, text, text_in_pieces, tool_call, TEXT_PIECE};
pub(crate) use long::{long_file, LONG_FILE, LONG_WINDOW_TOKENS};

/// The model name of S4's run with a tokenizer: one of OpenAI's, so the host counts
/// requests with `o200k_base`.
pub(crate) const TOKENIZED_MODEL: &str = "gpt-4o";
/// The reference conversation's user message.
pub(crate) const MESSAGE: &str = "Create a directory at docs/intro and write an index.page file there with a page header and a short intro paragraph.";
/// The folder the first turn creates.
pub(crate) const FOLDER: &str = "docs/intro";
/// The file the second turn writes.
pub(crate) const FILE: &str = "docs/intro/index.page";
/// What the second turn writes.
pub(crate) const PAGE: &str = "# Introduction\n\nWelcome to the documentation. This section gives a short overview of the project and where to start.";
/// The final text answer.
pub(crate) const ANSWER: &str = "Done! I created `docs/intro` and wrote `docs/intro/index.page`.";
/// Characters per content delta of an answer set by `--answer-chunks`: about one token, as a
/// provider streams them.
const TOKEN_PIECE: usize = 4;

/// The answer chosen by `--answer-chunks` ([`choose_answer`]).
static CHOSEN_ANSWER: OnceLock<Answer> = OnceLock::new();
/// The answer when none was chosen.
static SEED_ANSWER: LazyLock<Answer> = LazyLock::new(Answer::seed);

/// The final answer's text and how it is cut into content deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The whole text.
    pub(crate) text: String,
    /// Characters per content delta.
    pub(crate) piece: usize,
}

impl Answer {
    /// [`ANSWER`] in [`TEXT_PIECE`]s: the published scenarios' answer.
    fn seed() -> Answer {
        Answer {
            text: ANSWER.to_owned(),
            piece: TEXT_PIECE,
        }
    }

    /// [`ANSWER`]'s words repeated to `chunks` token-sized content deltas ([`TOKEN_PIECE`]).
    pub(crate) fn in_tokens(chunks: usize) -> Answer {
        let length = chunks * TOKEN_PIECE;
        let text: String = format!("{ANSWER} ").chars().cycle().take(length).collect();
        Answer {
            text,
            piece: TOKEN_PIECE,
        }
    }

    /// How many content deltas it streams as.
    pub(crate) fn chunks(&self) -> usize {
        self.text.chars().count().div_ceil(self.piece)
    }
}

/// Sets the final answer of S1–S3's conversation for this process (`--answer-chunks`); the
/// first call wins. Unset, it is [`ANSWER`].
pub(crate) fn choose_answer(answer: Answer) {
    let _ = CHOSEN_ANSWER.set(answer);
}

/// The answer `--answer-chunks` chose, if it did.
pub(crate) fn chosen_answer() -> Option<&'static Answer> {
    CHOSEN_ANSWER.get()
}

/// The final answer the upstream streams and the clients check.
pub(crate) fn answer() -> &'static Answer {
    chosen_answer().unwrap_or(&SEED_ANSWER)
}

/// `get_text_content` calls in the tool-flood turn.
pub(crate) const FLOOD_CALLS: usize = 1500;
/// The file the tool-flood turn reads, in the project root.
pub(crate) const FLOOD_FILE: &str = "big.txt";
/// Bytes of the huge-line turn's one `data:` line.
pub(crate) const HUGE_LINE_BYTES: usize = 60_000_000;
/// The huge line is written in pieces of this size, as a provider's server would.
const HUGE_LINE_WRITE: usize = 64 * 1024;
/// Requests to the misbehaving routes may be this large (the flood's second request carries
/// every tool result).
const MISBEHAVING_BODY_LIMIT: usize = 1 << 30;

/// How the upstream misbehaves under `/abuse/{slug}/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Misbehaviour {
    /// The first turn asks for [`FLOOD_CALLS`] reads of [`FLOOD_FILE`], each path spelt
    /// differently; once the request carries tool results, a text answer.
    ToolFlood,
    /// Every turn is a single `data:` line of [`HUGE_LINE_BYTES`] (its `content`), then `stop`.
    HugeLine,
}

impl Misbehaviour {
    fn slug(self) -> &'static str {
        match self {
            Misbehaviour::ToolFlood => "tool-flood",
            Misbehaviour::HugeLine => "huge-line",
        }
    }

    fn from_slug(slug: &str) -> Option<Misbehaviour> {
        [Misbehaviour::ToolFlood, Misbehaviour::HugeLine]
            .into_iter()
            .find(|m| m.slug() == slug)
    }
}

/// How fast the upstream answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pace {
    /// Before the first body byte of each turn (time to first token).
    pub(crate) first: Duration,
    /// Before each later chunk.
    pub(crate) between: Duration,
}

impl Pace {
    /// No delay at all.
    pub(crate) const FAST: Pace = Pace {
        first: Duration::ZERO,
        between: Duration::ZERO,
    };
}

/// The three turns as SSE events, one `Bytes` per event.
#[derive(Debug)]
pub(crate) struct Script {
    turns: [Vec<Bytes>; 3],
}

impl Script {
    fn seed(answer: &Answer) -> Script {
        let page_args = json!({"path": FILE, "text": PAGE}).to_string();
        Script {
            turns: [
                tool_call(
                    "call_mkdir",
                    "create_directory",
                    &json!({"path": FOLDER}).to_string(),
                ),
                tool_call("call_write", "write_text_content", &page_args),
                text_in_pieces(&answer.text, answer.piece),
            ],
        }
    }

    /// What the upstream alone takes for one conversation at `pace`: the delays it sleeps.
    pub(crate) fn own_time(&self, pace: Pace) -> Duration {
        self.turns
            .iter()
            .map(|events| pace.first + pace.between * (events.len() as u32 - 1))
            .sum()
    }
}

/// The `i`-th spelling of [`FLOOD_FILE`]: 11 parts `./` or `.//` (the bits of `i`), so every
/// call's arguments differ while naming the same file.
pub(crate) fn flood_path(i: usize) -> String {
    let prefix: String = (0..11)
        .map(|bit| if i >> bit & 1 == 1 { ".//" } else { "./" })
        .collect();
    format!("{prefix}{FLOOD_FILE}")
}

/// One turn asking for [`FLOOD_CALLS`] reads, each call whole in one delta (as some providers
/// send them).
fn tool_flood() -> Vec<Bytes> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for i in 0..FLOOD_CALLS {
        let args = json!({"path": flood_path(i)}).to_string();
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_flood_{i}"), "type": "function", "function": {"name": "get_text_content", "arguments": args}}]}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

/// One turn whose text is a single `data:` line of about [`HUGE_LINE_BYTES`], cut into
/// [`HUGE_LINE_WRITE`] writes.
fn huge_line() -> Vec<Bytes> {
    const SENTENCE: &str = "All work and no play makes a very long answer. ";
    let mut text = SENTENCE.repeat(HUGE_LINE_BYTES / SENTENCE.len() + 1);
    // The chunk's JSON around the text takes the other 200 bytes (ASCII: any cut is a char
    // boundary).
    text.truncate(HUGE_LINE_BYTES - 200);
    let line = chunk(json!({"content": text}), None);
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(
        (0..line.len())
            .step_by(HUGE_LINE_WRITE)
            .map(|at| line.slice(at..(at + HUGE_LINE_WRITE).min(line.len()))),
    );
    events.push(chunk(json!({}), Some("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

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

/// The request a host should send for turn `tools`: the model, streaming, five tools, and the
/// history so far in order.
fn deep_check(body: &[u8], tools: usize) -> Result<(), String> {
    let request: Value =
        serde_json::from_slice(body).map_err(|e| format!("request is not JSON: {e}"))?;
    if request["model"] != MODEL || request["stream"] != true {
        return Err("wrong model or not streaming".to_owned());
    }
    if request["tools"].as_array().map(Vec::len) != Some(5) {
        return Err("expected the five built-in tools".to_owned());
    }
    let roles: Vec<&str> = request["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    let expected: &[&str] = match tools {
        0 => &["user"],
        1 => &["user", "assistant", "tool"],
        _ => &["user", "assistant", "tool", "assistant", "tool"],
    };
    if roles != expected {
        return Err(format!("unexpected history roles {roles:?}"));
    }
    Ok(())
}

/// A request body like the host's for turn `tools`, for timing the upstream alone.
pub(crate) fn direct_request(tools: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": MESSAGE})];
    for i in 0..tools {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": []}));
        messages.push(
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "{\"ok\":true}"}),
        );
    }
    let tools: Vec<Value> = (0..5)
        .map(|i| json!({"type": "function", "function": {"name": format!("tool{i}"), "parameters": {"type": "object"}}}))
        .collect();
    json!({"model": MODEL, "stream": true, "messages": messages, "tools": tools})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_takes_about_a_second_at_the_s3_pace() {
        let pace = Pace {
            first: Duration::from_millis(200),
            between: Duration::from_millis(20),
        };
        let own = Script::seed(&Answer::seed()).own_time(pace);
        assert!(
            own > Duration::from_millis(900) && own < Duration::from_millis(1200),
            "{own:?}"
        );
        assert_eq!(
            Script::seed(&Answer::seed()).own_time(Pace::FAST),
            Duration::ZERO
        );
    }

    /// `--answer-chunks 200`: the answer turn streams 200 content deltas of one token each,
    /// which together are the answer the clients expect, and each is paced.
    #[test]
    fn an_answer_in_tokens_streams_one_delta_per_token() {
        let answer = Answer::in_tokens(200);
        assert_eq!(answer.chunks(), 200);
        assert_eq!(answer.text.chars().count(), 200 * TOKEN_PIECE);
        assert!(answer.text.starts_with(ANSWER));
        let script = Script::seed(&answer);
        // The role delta, 200 content deltas, the stop delta and `[DONE]`.
        assert_eq!(script.turns[2].len(), 203);
        let streamed: String = script.turns[2]
            .iter()
            .filter_map(|event| {
                let data = std::str::from_utf8(event).ok()?.strip_prefix("data: ")?;
                let chunk: Value = serde_json::from_str(data.trim()).ok()?;
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(streamed, answer.text);
        let pace = Pace {
            first: Duration::ZERO,
            between: Duration::from_millis(20),
        };
        let seed = Script::seed(&Answer::seed());
        let longer = script.own_time(pace) - seed.own_time(pace);
        let more = 203 - seed.turns[2].len();
        assert_eq!(longer, pace.between * u32::try_from(more).unwrap());
    }

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
    fn flood_paths_differ_and_all_name_the_file() {
        let paths: std::collections::HashSet<String> = (0..FLOOD_CALLS).map(flood_path).collect();
        assert_eq!(paths.len(), FLOOD_CALLS);
        for path in &paths {
            let parts: Vec<&str> = path
                .split('/')
                .filter(|p| !p.is_empty() && *p != ".")
                .collect();
            assert_eq!(parts, [FLOOD_FILE], "{path}");
        }
    }

    #[test]
    fn the_huge_line_is_one_data_line_in_64_kib_writes() {
        let events = huge_line();
        let line: Vec<u8> = events[1..events.len() - 2].concat();
        assert!(line.starts_with(b"data: {"));
        assert!(line.len() > HUGE_LINE_BYTES - 100 && line.len() <= HUGE_LINE_BYTES);
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 2);
        assert!(line.ends_with(b"}\n\n"));
        assert!(events[1..events.len() - 3]
            .iter()
            .all(|e| e.len() == HUGE_LINE_WRITE));
    }

    #[test]
    fn tool_messages_pick_the_turn() {
        for tools in 0..3 {
            let body = serde_json::to_vec(&direct_request(tools)).unwrap();
            assert_eq!(count(&body, br#""role":"tool""#), tools);
        }
    }
}
