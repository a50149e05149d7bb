//! Time-dependent decoding under a paused clock: the idle timeout (keep-alive comments do not
//! reset it), the turn deadline, and what end-of-stream means; and the size limits: a huge
//! line is refused after reading about the event cap, a long turn at `max_turn_bytes`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{stream, Stream, StreamExt};

use super::*;

type Item = Result<Bytes, std::io::Error>;

/// Yields each `(pause, bytes)` after its pause, then stays open forever.
fn timed(parts: Vec<(u64, &'static str)>) -> impl Stream<Item = Item> + Send + 'static {
    stream::iter(parts)
        .then(|(ms, text)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(Bytes::from_static(text.as_bytes()))
        })
        .chain(stream::pending())
}

fn options(idle_ms: u64, turn_ms: Option<u64>) -> DecodeOptions {
    DecodeOptions {
        provider: "test".into(),
        idle_timeout: Some(Duration::from_millis(idle_ms)),
        turn_timeout: turn_ms.map(Duration::from_millis),
        limits: Limits::default(),
    }
}

async fn collect(s: TurnStream) -> Vec<Result<TurnEvent, LlmError>> {
    s.collect().await
}

const TEXT: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";

#[tokio::test(start_paused = true)]
async fn keep_alive_comments_do_not_reset_the_idle_timeout() {
    let comments: Vec<(u64, &str)> = (0..100).map(|_| (1_000, ": PROCESSING\n\n")).collect();
    let mut parts = vec![(0, TEXT)];
    parts.extend(comments);
    let started = Instant::now();
    let got = collect(decode_stream(timed(parts), options(5_000, None))).await;
    assert!(matches!(&got[0], Ok(TurnEvent::TextDelta(t)) if t == "hi"));
    assert!(
        matches!(&got[1], Err(LlmError::IdleTimeout { after, .. }) if *after == Duration::from_secs(5)),
        "{got:?}"
    );
    assert_eq!(got.len(), 2);
    // Paused clock: exact. The comments kept coming every second; the timeout still fired.
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn data_events_reset_the_idle_timeout_and_the_turn_deadline_still_applies() {
    let parts: Vec<(u64, &str)> = (0..100).map(|_| (4_000, TEXT)).collect();
    let got = collect(decode_stream(timed(parts), options(5_000, Some(30_000)))).await;
    let deltas = got
        .iter()
        .filter(|e| matches!(e, Ok(TurnEvent::TextDelta(_))))
        .count();
    assert_eq!(deltas, 7);
    assert!(
        matches!(got.last(), Some(Err(LlmError::TurnTimeout { .. }))),
        "{got:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_idle_timeout_counts_from_the_last_data_event_however_many_came() {
    // The stream's one timer is armed for the first deadline (5 s) and moved on each time it
    // fires early; it must still fire exactly 5 s after the tenth event, not at its first
    // deadline nor a wait later.
    let parts: Vec<(u64, &str)> = (0..10).map(|_| (1_000, TEXT)).collect();
    let started = Instant::now();
    let got = collect(decode_stream(timed(parts), options(5_000, None))).await;
    let deltas = got
        .iter()
        .filter(|e| matches!(e, Ok(TurnEvent::TextDelta(_))))
        .count();
    assert_eq!(deltas, 10, "{got:?}");
    assert!(
        matches!(got.last(), Some(Err(LlmError::IdleTimeout { .. }))),
        "{got:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn finish_reason_then_silence_completes_the_turn() {
    let parts = vec![
        (0, TEXT),
        (
            0,
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        ),
    ];
    let got = collect(decode_stream(timed(parts), options(5_000, None))).await;
    assert!(
        matches!(got.last(), Some(Ok(TurnEvent::Finished(t))) if t.text == "hi"),
        "{got:?}"
    );
}

#[tokio::test]
async fn eof_without_done_or_finish_reason_is_a_cut_after_the_text() {
    let body = stream::iter([Ok::<_, std::io::Error>(TEXT)]);
    let got = collect(decode_stream(body, DecodeOptions::default())).await;
    assert!(matches!(&got[0], Ok(TurnEvent::TextDelta(t)) if t == "hi"));
    assert!(
        matches!(&got[1], Err(LlmError::StreamCut { source: None, .. })),
        "{got:?}"
    );
    assert_eq!(got.len(), 2);
}

#[tokio::test]
async fn eof_after_a_finish_reason_without_done_is_complete() {
    let body = stream::iter([Ok::<_, std::io::Error>(
        "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
    )]);
    let turn = decode_stream(body, DecodeOptions::default())
        .collect_turn(|_| {})
        .await
        .unwrap();
    assert_eq!(turn.text, "ok");
}

#[tokio::test]
async fn a_broken_connection_is_a_cut_with_its_cause() {
    let body = stream::iter([
        Ok(Bytes::from_static(TEXT.as_bytes())),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset by peer",
        )),
    ]);
    let got = collect(decode_stream(body, DecodeOptions::default())).await;
    match &got[1] {
        Err(
            e @ LlmError::StreamCut {
                source: Some(s), ..
            },
        ) => {
            assert_eq!(s.to_string(), "reset by peer");
            assert_eq!(
                e.to_string(),
                "the stream from the model provider at provider ended before the turn was complete"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn event_error_and_non_json_data_are_reported() {
    let body = stream::iter([Ok::<_, std::io::Error>(
        "event: error\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n",
    )]);
    let got = collect(decode_stream(body, DecodeOptions::default())).await;
    assert!(
        matches!(&got[..], [Err(LlmError::Provider { message, code: Some(c), .. })] if message == "Overloaded" && c == "overloaded_error"),
        "{got:?}"
    );
    let body = stream::iter([Ok::<_, std::io::Error>("data: <html>\n\n")]);
    let got = collect(decode_stream(body, DecodeOptions::default())).await;
    assert!(
        matches!(&got[..], [Err(LlmError::Malformed { .. })]),
        "{got:?}"
    );
}

/// A 60 MB `data:` line in 16 KiB reads, counting the bytes the decoder pulled.
fn huge_line(pulled: Arc<AtomicUsize>) -> impl Stream<Item = Item> + Send + 'static {
    const READ: usize = 16 * 1024;
    let filler = Bytes::from(vec![b'x'; READ]);
    let head = Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"");
    stream::iter(std::iter::once(head).chain(std::iter::repeat_n(filler, 60_000_000 / READ))).map(
        move |bytes| {
            pulled.fetch_add(bytes.len(), Ordering::SeqCst);
            Ok(bytes)
        },
    )
}

#[tokio::test]
async fn a_60_mb_line_is_refused_after_reading_about_the_cap() {
    let pulled = Arc::new(AtomicUsize::new(0));
    let options = DecodeOptions::default();
    let cap = options.limits.max_event_bytes();
    let got = collect(decode_stream(huge_line(Arc::clone(&pulled)), options)).await;
    match &got[..] {
        [Err(e @ LlmError::TooLarge { limit, .. })] => {
            assert_eq!(
                *limit,
                SizeLimit::Event {
                    max_bytes: 4_259_840,
                    max_turn_bytes: 2_097_152
                }
            );
            assert!(e
                .to_string()
                .starts_with("the model's turn exceeded 2097152 bytes"));
        }
        other => panic!("{other:?}"),
    }
    let pulled = pulled.load(Ordering::SeqCst);
    assert!(
        pulled > cap && pulled <= cap + 16 * 1024,
        "pulled {pulled} bytes for a cap of {cap}"
    );
}

fn text_chunk(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
}

#[tokio::test]
async fn a_turn_past_max_turn_bytes_fails_after_the_text_within_it() {
    let piece = "0123456789".repeat(100);
    let body: Vec<Result<String, std::io::Error>> =
        (0..20).map(|_| Ok(text_chunk(&piece))).collect();
    let mut options = DecodeOptions::default();
    options.limits.max_turn_bytes = 8192;
    let got = collect(decode_stream(stream::iter(body), options)).await;
    let text: String = got
        .iter()
        .filter_map(|e| match e {
            Ok(TurnEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text.len(),
        8000,
        "text within the limit is handed out, no more"
    );
    match got.last() {
        Some(Err(
            e @ LlmError::TooLarge {
                limit: SizeLimit::Turn { max_bytes: 8192 },
                ..
            },
        )) => {
            assert_eq!(e.kind(), "too_large");
        }
        other => panic!("{other:?}"),
    }
}

/// Decodes a whole body given at once.
async fn decode_all(body: &str) -> Vec<Result<TurnEvent, LlmError>> {
    let body = stream::iter([Ok::<_, std::io::Error>(body.to_owned())]);
    collect(decode_stream(body, DecodeOptions::default())).await
}

fn received(got: &[Result<TurnEvent, LlmError>]) -> &str {
    match got {
        [Err(LlmError::EmptyTurn { received, .. })] => received,
        other => panic!("expected only an empty turn: {other:?}"),
    }
}

#[tokio::test]
async fn a_stream_with_no_text_call_or_finish_reason_is_an_empty_turn_saying_what_came() {
    let usage_only = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5}}\n\n";
    let body = format!("{usage_only}{usage_only}{usage_only}data: [DONE]\n\n");
    let got = decode_all(&body).await;
    assert_eq!(received(&got), "3 chunks with no choices, then [DONE]");

    let role_only =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    let got = decode_all(&format!("{role_only}data: [DONE]\n\n")).await;
    assert_eq!(
        received(&got),
        "1 chunk with no text or tool call, then [DONE]"
    );
    // The same without `[DONE]`: the body just ends.
    let got = decode_all(role_only).await;
    assert_eq!(
        received(&got),
        "1 chunk with no text or tool call, then the end of the stream"
    );
    assert_eq!(
        received(&decode_all("data: [DONE]\n\n").await),
        "only [DONE]"
    );
    assert_eq!(
        received(&decode_all(": keep-alive\n\n").await),
        "no data before the stream ended"
    );
    let e = &decode_all("data: [DONE]\n\n").await[0];
    assert_eq!(
        e.as_ref().unwrap_err().to_string(),
        "the model provider at provider ended the turn without text, tool calls or a finish \
         reason (received only [DONE])"
    );
}

#[tokio::test]
async fn a_stop_with_no_text_is_a_valid_silent_turn_and_a_bare_length_is_not() {
    let stop = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    match &decode_all(stop).await[..] {
        [Ok(TurnEvent::Finished(turn))] => {
            assert_eq!(turn.text, "");
            assert!(turn.tool_calls.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let length = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    let got = decode_all(length).await;
    assert!(
        matches!(&got[..], [Err(LlmError::LengthBeforeOutput { .. })]),
        "{got:?}"
    );
    // With text, `length` is a (cut short) answer as before.
    let some = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    assert!(matches!(
        decode_all(some).await.last(),
        Some(Ok(TurnEvent::Finished(t))) if t.text == "Hel"
    ));
}

/// The tool-call status events of a decoded body, as `(kind, index, name or bytes)`.
fn status_of(got: &[Result<TurnEvent, LlmError>]) -> Vec<(&'static str, usize, String)> {
    got.iter()
        .filter_map(|event| match event {
            Ok(TurnEvent::ToolCallStarted { index, name, .. }) => {
                Some(("started", *index, name.clone()))
            }
            Ok(TurnEvent::ToolCallProgress { index, bytes }) => {
                Some(("progress", *index, bytes.to_string()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_tool_call_is_started_by_name_then_its_argument_bytes_grow_per_chunk() {
    let open = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"write_text_content\",\"arguments\":\"\"}}]}}]}\n\n";
    let part = |text: &str| {
        format!(
            "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{}}}}}]}}}}]}}\n\n",
            serde_json::to_string(text).unwrap_or_default()
        )
    };
    let body = format!(
        "{open}{}{}{}data: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n",
        part("{\"path\":"),
        part("\"a.txt\","),
        part("\"content\":\"x\"}")
    );
    let got = decode_all(&body).await;
    assert_eq!(
        status_of(&got),
        vec![
            ("started", 0, "write_text_content".to_string()),
            ("progress", 0, "8".to_string()),
            ("progress", 0, "16".to_string()),
            ("progress", 0, "30".to_string()),
        ]
    );
    match &got[0] {
        Ok(TurnEvent::ToolCallStarted { id, .. }) => assert_eq!(id.as_deref(), Some("call_1")),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(got.last(), Some(Ok(TurnEvent::Finished(t))) if t.tool_calls[0].raw_arguments.len() == 30),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_whole_call_in_one_chunk_is_started_then_sized_before_the_finished_turn() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"ok \",\"tool_calls\":[{\"id\":\"c9\",\"function\":{\"name\":\"list_files\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let got = decode_all(body).await;
    assert!(
        matches!(&got[0], Ok(TurnEvent::TextDelta(t)) if t == "ok "),
        "{got:?}"
    );
    assert_eq!(
        status_of(&got),
        vec![
            ("started", 0, "list_files".to_string()),
            ("progress", 0, "2".to_string()),
        ]
    );
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(matches!(got.last(), Some(Ok(TurnEvent::Finished(_)))));
}
