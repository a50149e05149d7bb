//! Time-dependent decoding under a paused clock: the idle timeout (keep-alive comments do not
//! reset it), the turn deadline, and what end-of-stream means.

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
