//! `ScriptedUpstream`: an OpenAI-compatible `POST /v1/chat/completions` on loopback that
//! stands for the provider. It serves one scripted [`Turn`] per request from a queue (and
//! fails loudly when the queue is empty), or by step or per message for many concurrent
//! conversations; speaks the providers' exact SSE wire format, can
//! pause between chunks, cut the connection, answer an error status or stream a runaway
//! `data:` line, and records every request it received. `GET /v1/models` answers 404 (a
//! server without the endpoint) unless a test sets a model list, in Ollama's shape, or a
//! status ([`ScriptedUpstream::set_models`]). Ollama's and LM Studio's own endpoints are
//! `server_info.rs`'s; an Ollama that cuts a request too long for its window silently is
//! [`ScriptedUpstream::start_ollama`].

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};

/// One model turn as the upstream will send it.
#[derive(Debug, Clone)]
pub struct Turn {
    kind: TurnKind,
    /// Bytes per chunk written to the socket (`None`: one write per SSE event).
    split: Option<usize>,
    /// Pause before each chunk.
    delay: Duration,
    /// Close the connection after this many bytes.
    cut_after: Option<usize>,
    /// Pause before the first byte (e.g. time to first token).
    first_delay: Duration,
    /// Send nothing until the test calls [`ScriptedUpstream::release`].
    held: bool,
}

#[derive(Debug, Clone)]
enum TurnKind {
    Sse(Vec<String>),
    /// One `data:` line of this many bytes of text, made as it is sent, never ended.
    HugeLine(usize),
    Status {
        code: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
}

/// The id of the OpenAI-style chunk stream.
const CHUNK_ID: &str = "chatcmpl-scripted";

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": 1_756_212_345,
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {body}\n\n")
}

impl Turn {
    fn sse(events: Vec<String>) -> Turn {
        Turn {
            kind: TurnKind::Sse(events),
            split: None,
            delay: Duration::ZERO,
            cut_after: None,
            first_delay: Duration::ZERO,
            held: false,
        }
    }

    /// A text answer, streamed a few characters per chunk, ending with `stop` and `[DONE]`.
    pub fn text(text: &str) -> Turn {
        Turn::text_in_pieces(text, 8)
    }

    /// A text answer streamed `chars` characters per chunk (large pieces fill buffers fast).
    pub fn text_in_pieces(text: &str, chars: usize) -> Turn {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        let text: Vec<char> = text.chars().collect();
        for piece in text.chunks(chars) {
            events.push(chunk(
                json!({"content": piece.iter().collect::<String>()}),
                None,
            ));
        }
        events.push(chunk(json!({}), Some("stop")));
        events.push("data: [DONE]\n\n".to_owned());
        Turn::sse(events)
    }

    /// Tool calls `(id, name, arguments)`, in OpenAI's canonical shape: id and name in the
    /// first delta of each call, arguments split across deltas, `tool_calls` finish.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Turn {
        let raw: Vec<(&str, &str, String)> = calls
            .iter()
            .map(|(id, name, args)| (*id, *name, args.to_string()))
            .collect();
        Turn::raw_tool_calls(
            &raw.iter()
                .map(|(i, n, a)| (*i, *n, a.as_str()))
                .collect::<Vec<_>>(),
        )
    }

    /// Tool calls whose arguments are sent as given, valid JSON or not.
    pub fn raw_tool_calls(calls: &[(&str, &str, &str)]) -> Turn {
        let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        for (index, (id, name, args)) in calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let chars: Vec<char> = args.chars().collect();
            for piece in chars.chunks(7) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece.iter().collect::<String>()}}]}),
                    None,
                ));
            }
        }
        events.push(chunk(json!({}), Some("tool_calls")));
        events.push("data: [DONE]\n\n".to_owned());
        Turn::sse(events)
    }

    /// A turn sent as the given `delta` objects, one chunk each in OpenAI's chunk envelope,
    /// then a `finish` chunk and `[DONE]`: for shapes the other builders do not make
    /// (text and calls in one turn, calls without `index`).
    pub fn deltas(deltas: &[Value], finish: &str) -> Turn {
        let mut events: Vec<String> = deltas.iter().map(|d| chunk(d.clone(), None)).collect();
        events.push(chunk(json!({}), Some(finish)));
        events.push("data: [DONE]\n\n".to_owned());
        Turn::sse(events)
    }

    /// A single `data:` line carrying `bytes` bytes of answer text, written 64 KiB at a
    /// time as the client reads (never held whole), without an end: a runaway provider.
    /// [`ScriptedUpstream::huge_bytes_sent`] counts what was written.
    pub fn huge_line(bytes: usize) -> Turn {
        Turn {
            kind: TurnKind::HugeLine(bytes),
            ..Turn::sse(Vec::new())
        }
    }

    /// The bytes of a real provider's stream from the fixtures, sent as they are.
    pub fn fixture(name: &str) -> Turn {
        Turn::sse(vec![fixture_text(name)])
    }

    /// An HTTP error status with a provider-style JSON error body.
    pub fn status(code: u16, message: &str) -> Turn {
        Turn {
            kind: TurnKind::Status {
                code,
                body: json!({"error": {"message": message, "type": "scripted_error"}}).to_string(),
                headers: Vec::new(),
            },
            ..Turn::sse(Vec::new())
        }
    }

    /// An HTTP error status with `body` exactly as a provider sends it (its own JSON shape).
    pub fn error_body(code: u16, body: &str) -> Turn {
        Turn {
            kind: TurnKind::Status {
                code,
                body: body.to_owned(),
                headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            },
            ..Turn::sse(Vec::new())
        }
    }

    /// A `200` stream of these SSE events, sent as given (e.g. chunks that carry nothing).
    pub fn events(events: &[&str]) -> Turn {
        Turn::sse(events.iter().map(|e| (*e).to_owned()).collect())
    }

    /// Adds a response header (e.g. `Retry-After` on a 429).
    pub fn header(mut self, name: &str, value: &str) -> Turn {
        if let TurnKind::Status { headers, .. } = &mut self.kind {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Sends the body in chunks of `bytes` bytes, wherever they fall.
    pub fn split_every(mut self, bytes: usize) -> Turn {
        self.split = Some(bytes.max(1));
        self
    }

    /// Pauses before each chunk.
    pub fn chunk_delay(mut self, delay: Duration) -> Turn {
        self.delay = delay;
        self
    }

    /// Pauses before the first byte.
    pub fn first_delay(mut self, delay: Duration) -> Turn {
        self.first_delay = delay;
        self
    }

    /// Sends nothing, not even the status, until the test calls [`ScriptedUpstream::release`]:
    /// what the client has seen by then came before this turn, however slow the machine.
    pub fn held(mut self) -> Turn {
        self.held = true;
        self
    }

    /// Closes the connection after `bytes` bytes of the body.
    pub fn cut_after(mut self, bytes: usize) -> Turn {
        self.cut_after = Some(bytes);
        self
    }

    fn chunks(&self, events: &[String]) -> Vec<Bytes> {
        let mut chunks: Vec<Vec<u8>> = match self.split {
            None => events.iter().map(|e| e.as_bytes().to_vec()).collect(),
            Some(n) => events
                .concat()
                .into_bytes()
                .chunks(n)
                .map(<[u8]>::to_vec)
                .collect(),
        };
        if let Some(limit) = self.cut_after {
            let mut left = limit;
            chunks = chunks
                .into_iter()
                .filter_map(|mut c| {
                    if left == 0 {
                        return None;
                    }
                    c.truncate(left);
                    left -= c.len();
                    Some(c)
                })
                .collect();
        }
        chunks.into_iter().map(Bytes::from).collect()
    }
}

/// The text of a shared provider fixture (the project's copy of them).
pub fn fixture_text(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../llm/tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// What the upstream received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The JSON request body.
    pub body: Value,
    /// The request headers.
    pub headers: HeaderMap,
}

#[derive(Debug, Default)]
pub(super) struct Script {
    turns: Mutex<VecDeque<Turn>>,
    /// When not empty: every conversation gets these turns, the n-th when the request holds
    /// n `tool` messages (see [`ScriptedUpstream::start_by_step`]).
    by_step: Vec<Turn>,
    /// When set: every user message gets the first turn (its tool call), then the second
    /// once the request ends on a `tool` message (see [`ScriptedUpstream::start_per_message`]).
    per_message: Option<(Turn, Turn)>,
    received: Mutex<Vec<Received>>,
    /// Responses whose body stream was dropped before it ended (the client went away).
    dropped: AtomicUsize,
    /// Bytes of `Turn::huge_line` bodies handed to the connection.
    huge_sent: AtomicUsize,
    /// What `GET /v1/models` answers (`None`: 404).
    models: Mutex<Option<Models>>,
    /// Opened by [`ScriptedUpstream::release`] for the [`Turn::held`] turns.
    release: Release,
    /// The headers of every `GET /v1/models`.
    models_received: Mutex<Vec<HeaderMap>>,
    /// When set: the context window it enforces (see [`ScriptedUpstream::start_windowed`]).
    window: Option<Windowed>,
    /// Requests refused as over the window.
    over_window: AtomicUsize,
    /// Summary requests answered.
    summaries: AtomicUsize,
    /// Ollama's and LM Studio's own endpoints.
    pub(super) info: super::server_info::Info,
}

/// A context window the upstream enforces, counting four bytes of request body a token.
#[derive(Debug, Clone)]
struct Windowed {
    tokens: usize,
    /// The status and body a request over the window gets; `None`: it is cut silently, as
    /// Ollama does (answered from its end, with `usage.prompt_tokens` the window).
    overflow: Option<(u16, String)>,
}

/// What a silently cut request is answered: the model never saw the question.
pub const CUT_ANSWER: &str = "I cannot see any note or question.";

/// The gate of the [`Turn::held`] turns: no permits until [`ScriptedUpstream::release`].
#[derive(Debug)]
struct Release(tokio::sync::Semaphore);

impl Default for Release {
    fn default() -> Self {
        Release(tokio::sync::Semaphore::new(0))
    }
}

/// What `GET /v1/models` answers.
#[derive(Debug, Clone)]
pub enum Models {
    /// These ids, in Ollama's shape.
    List(Vec<String>),
    /// This status with a provider-style error body.
    Status(u16),
    /// This body, as it is (a list in another service's shape).
    Raw(Value),
}

/// A running scripted upstream.
#[derive(Debug, Clone)]
pub struct ScriptedUpstream {
    /// `http://127.0.0.1:PORT/v1`, the `base_url` to configure.
    pub base_url: String,
    script: Arc<Script>,
}

impl ScriptedUpstream {
    /// Starts an upstream on loopback that will serve `turns` in order.
    pub async fn start(turns: Vec<Turn>) -> ScriptedUpstream {
        let script = Script::default();
        script.turns.lock().unwrap().extend(turns);
        ScriptedUpstream::serve(script).await
    }

    async fn serve(script: Script) -> ScriptedUpstream {
        let script = Arc::new(script);
        let app = Router::new()
            .route("/v1/chat/completions", post(serve_turn))
            .route("/v1/models", get(serve_models))
            .route("/api/show", post(super::server_info::show))
            .route("/api/ps", get(super::server_info::ps))
            .route("/api/v0/models", get(super::server_info::lmstudio))
            .with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            axum::serve(listener, app).await.expect("upstream serves");
        });
        ScriptedUpstream { base_url, script }
    }

    /// Starts an upstream that answers every conversation with `turns`, choosing the turn by
    /// the number of `tool` messages in the request (one tool call per turn), so any number of
    /// conversations can run at once.
    pub async fn start_by_step(turns: Vec<Turn>) -> ScriptedUpstream {
        ScriptedUpstream::serve(Script {
            by_step: turns,
            ..Script::default()
        })
        .await
    }

    /// Starts an upstream that answers every user message of every conversation with `call`
    /// (a turn of tool calls), then with `answer` once the request ends on a `tool` message:
    /// one tool call per message, however many messages a conversation already holds.
    pub async fn start_per_message(call: Turn, answer: Turn) -> ScriptedUpstream {
        ScriptedUpstream::serve(Script {
            per_message: Some((call, answer)),
            ..Script::default()
        })
        .await
    }

    /// Starts an upstream like [`ScriptedUpstream::start_per_message`] that enforces a
    /// context window of `tokens` (four bytes of request body a token): a bigger request gets
    /// `overflow` (a status and a provider's real body, `support::overflow`; a `200` body is
    /// sent as a stream). A request whose system message asks
    /// for a summary is answered with one, numbered.
    pub async fn start_windowed(
        tokens: usize,
        overflow: (u16, &str),
        call: Turn,
        answer: Turn,
    ) -> ScriptedUpstream {
        ScriptedUpstream::serve(Script {
            per_message: Some((call, answer)),
            window: Some(Windowed {
                tokens,
                overflow: Some((overflow.0, overflow.1.to_owned())),
            }),
            ..Script::default()
        })
        .await
    }

    /// Starts an Ollama serving `model` (`show`: its `/api/show` body), loading it with
    /// `num_ctx` on the first chat request, answering as
    /// [`ScriptedUpstream::start_windowed`] does, but a request over its window is cut
    /// silently: answered [`CUT_ANSWER`] with `usage.prompt_tokens` the window. Usage comes
    /// only when the request asks for it (`stream_options.include_usage`), as Ollama's does.
    pub async fn start_ollama(
        model: &str,
        show: Value,
        num_ctx: usize,
        call: Turn,
        answer: Turn,
    ) -> ScriptedUpstream {
        let script = Script {
            per_message: Some((call, answer)),
            window: Some(Windowed {
                tokens: num_ctx,
                overflow: None,
            }),
            ..Script::default()
        };
        script.info.set_ollama(model, show, num_ctx);
        ScriptedUpstream::serve(script).await
    }

    /// Ollama's and LM Studio's own endpoints, to set what they answer.
    pub fn info(&self) -> &super::server_info::Info {
        &self.script.info
    }

    /// Requests refused as over the window ([`ScriptedUpstream::start_windowed`]).
    pub fn over_window(&self) -> usize {
        self.script.over_window.load(Ordering::SeqCst)
    }

    /// Summary requests answered ([`ScriptedUpstream::start_windowed`]).
    pub fn summaries(&self) -> usize {
        self.script.summaries.load(Ordering::SeqCst)
    }

    /// Sets what `GET /v1/models` answers from now on.
    pub fn set_models(&self, models: Models) {
        *self.script.models.lock().unwrap() = Some(models);
    }

    /// The headers of every `GET /v1/models` received so far.
    pub fn models_received(&self) -> Vec<HeaderMap> {
        self.script.models_received.lock().unwrap().clone()
    }

    /// Queues more turns.
    pub fn push(&self, turns: impl IntoIterator<Item = Turn>) {
        self.script.turns.lock().unwrap().extend(turns);
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.script.received.lock().unwrap().clone()
    }

    /// Waits (generously: ten seconds) until `count` requests have arrived, so a test knows
    /// which scripted turn a run got before it starts another.
    pub async fn until_received(&self, count: usize) {
        for _ in 0..400 {
            if self.received().len() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "the upstream received {} requests, expected {count}",
            self.received().len()
        );
    }

    /// How many responses the client abandoned mid-stream, before their last chunk was
    /// handed to the connection (a close after the last chunk is a normal end, not counted).
    pub fn dropped(&self) -> usize {
        self.script.dropped.load(Ordering::SeqCst)
    }

    /// How many bytes of `Turn::huge_line` bodies were handed to the connection.
    pub fn huge_bytes_sent(&self) -> usize {
        self.script.huge_sent.load(Ordering::SeqCst)
    }

    /// Lets every [`Turn::held`] turn, waiting or still to come, be sent.
    pub fn release(&self) {
        self.script
            .release
            .0
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    /// Panics if turns are left that the host never asked for.
    pub fn assert_consumed(&self) {
        let left = self.script.turns.lock().unwrap().len();
        assert_eq!(
            left, 0,
            "the host made fewer model requests than scripted ({left} turns left)"
        );
    }
}

/// `GET /v1/models`: the list as Ollama sends it, or the set status.
async fn serve_models(State(script): State<Arc<Script>>, headers: HeaderMap) -> Response {
    script.models_received.lock().unwrap().push(headers);
    let models = script.models.lock().unwrap().clone();
    match models {
        None => StatusCode::NOT_FOUND.into_response(),
        Some(Models::Status(code)) => (
            StatusCode::from_u16(code).expect("valid status"),
            json!({"error": {"message": "scripted models error", "type": "scripted_error"}})
                .to_string(),
        )
            .into_response(),
        Some(Models::Raw(body)) => axum::Json(body).into_response(),
        Some(Models::List(ids)) => {
            let data: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model", "created": 1_756_212_345, "owned_by": "library"}))
                .collect();
            axum::Json(json!({"object": "list", "data": data})).into_response()
        }
    }
}

/// Counts a response as dropped unless it was marked finished (its last chunk handed out).
struct DropWatch {
    script: Arc<Script>,
    finished: bool,
}

impl DropWatch {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.script.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn serve_turn(
    State(script): State<Arc<Script>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bytes = body.len();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(window) = &script.window {
        let summary = body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You summarise"));
        script.received.lock().unwrap().push(Received {
            body: body.clone(),
            headers: headers.clone(),
        });
        let tokens = script.info.chat().unwrap_or(window.tokens);
        let usage = body["stream_options"]["include_usage"] == true;
        let over = bytes / 4 > tokens;
        // A summary request Ollama cuts is still answered with one: not counted.
        if over && (window.overflow.is_some() || !summary) {
            script.over_window.fetch_add(1, Ordering::SeqCst);
        }
        match &window.overflow {
            Some((200, body)) if over => return sse_response(vec![body.clone()]),
            Some((code, body)) if over => {
                return (
                    StatusCode::from_u16(*code).expect("status"),
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body.clone(),
                )
                    .into_response();
            }
            None if over && !summary => {
                let events = with_usage(Turn::text(CUT_ANSWER), usage, tokens);
                return sse_response(events);
            }
            _ => {}
        }
        if summary {
            let n = script.summaries.fetch_add(1, Ordering::SeqCst) + 1;
            let text = format!("Summary {n}: the user asked about note.txt; it was read.");
            return sse_response(with_usage(Turn::text(&text), usage, tokens.min(bytes / 4)));
        }
        let after_tool = script.received.lock().unwrap().last().and_then(|r| {
            r.body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(|m| m["role"] == "tool")
        }) == Some(true);
        let (call, answer) = script.per_message.clone().expect("windowed has turns");
        let turn = if after_tool { answer } else { call };
        return sse_response(with_usage(turn, usage, bytes / 4));
    }
    let tools = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let after_tool = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    script
        .received
        .lock()
        .unwrap()
        .push(Received { body, headers });
    let next = if let Some((call, answer)) = &script.per_message {
        Some(if after_tool { answer } else { call }.clone())
    } else if script.by_step.is_empty() {
        script.turns.lock().unwrap().pop_front()
    } else {
        script.by_step.get(tools).cloned()
    };
    let Some(turn) = next else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted upstream: no turn left for this request",
        )
            .into_response();
    };
    if turn.held {
        let _open = script.release.0.acquire().await.expect("never closed");
    }
    match &turn.kind {
        TurnKind::HugeLine(bytes) => huge_line(script, *bytes),
        TurnKind::Status {
            code,
            body,
            headers,
        } => {
            let mut response = (
                StatusCode::from_u16(*code).expect("valid status"),
                body.clone(),
            )
                .into_response();
            for (name, value) in headers {
                response.headers_mut().insert(
                    axum::http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                    value.parse().expect("header value"),
                );
            }
            response
        }
        TurnKind::Sse(events) => {
            let chunks = turn.chunks(events);
            let cut = turn.cut_after.is_some();
            let watch = DropWatch {
                script,
                finished: false,
            };
            let state = (
                chunks.into_iter(),
                watch,
                turn.delay,
                turn.first_delay,
                true,
            );
            let body = stream::unfold(
                state,
                move |(mut chunks, mut watch, delay, first_delay, first)| async move {
                    tokio::time::sleep(if first { first_delay } else { delay }).await;
                    match chunks.next() {
                        Some(bytes) => {
                            // The last chunk is handed out: a close from here on is the
                            // normal end of the response, not a drop mid-stream.
                            if chunks.len() == 0 && !cut {
                                watch.finish();
                            }
                            Some((Ok(bytes), (chunks, watch, delay, first_delay, false)))
                        }
                        None if cut => {
                            // An error ends the body without its terminating chunk: the
                            // connection breaks mid-turn, as when a provider dies.
                            watch.finish();
                            Some((
                                Err(std::io::Error::other("scripted cut")),
                                (chunks, watch, delay, first_delay, false),
                            ))
                        }
                        None => {
                            watch.finish();
                            None
                        }
                    }
                },
            );
            Response::builder()
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(Body::from_stream(body))
                .expect("response")
        }
    }
}

/// The body of `Turn::huge_line`: a chunk's opening, then `x` up to `bytes`, as the client
/// reads; every piece shares one 64 KiB buffer.
fn huge_line(script: Arc<Script>, bytes: usize) -> Response {
    const PIECE: usize = 64 * 1024;
    let filler = Bytes::from(vec![b'x'; PIECE]);
    let head = Bytes::from_static(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    let pieces = std::iter::once(head).chain(std::iter::repeat_n(filler, bytes / PIECE));
    let watch = DropWatch {
        script: Arc::clone(&script),
        finished: false,
    };
    let body = stream::iter(pieces).map(move |piece| {
        let _keep = &watch;
        script.huge_sent.fetch_add(piece.len(), Ordering::SeqCst);
        Ok::<_, std::io::Error>(piece)
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .expect("response")
}

/// The SSE events of `turn`, with OpenAI's usage chunk (`prompt_tokens`) before `[DONE]`
/// when `usage` was asked for.
fn with_usage(turn: Turn, usage: bool, prompt_tokens: usize) -> Vec<String> {
    let TurnKind::Sse(mut events) = turn.kind else {
        panic!("a windowed upstream streams its turns");
    };
    if usage {
        let chunk = json!({
            "id": CHUNK_ID, "object": "chat.completion.chunk", "created": 1_756_212_345,
            "model": "scripted-model", "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 9, "total_tokens": prompt_tokens + 9}
        });
        let at = events.len().saturating_sub(1);
        events.insert(at, format!("data: {chunk}\n\n"));
    }
    events
}

/// `events` as one plain SSE response.
fn sse_response(events: Vec<String>) -> Response {
    let body: String = events.concat();
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}
