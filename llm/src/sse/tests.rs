//! The frame stream over a byte stream (the framer's own rules are in `framer/tests.rs`),
//! its caps, and how each event is classified.

use futures_util::stream;

use super::*;

fn limits(max_turn_bytes: usize, max_response_bytes: usize) -> Limits {
    Limits {
        max_turn_bytes,
        max_response_bytes,
        ..Limits::default()
    }
}

async fn events(parts: &[&'static str]) -> Vec<Result<(String, String), String>> {
    let items: Vec<_> = parts
        .iter()
        .map(|p| Ok::<_, std::io::Error>(p.as_bytes()))
        .collect();
    frames(stream::iter(items), &Limits::default())
        .map(|r| match r {
            Ok(e) => Ok((e.event.into_owned(), e.data)),
            Err(FrameError::Malformed(m)) => Err(m),
            Err(FrameError::Transport(e)) => Err(e.to_string()),
            Err(FrameError::TooLarge(limit)) => Err(format!("{limit:?}")),
        })
        .collect()
        .await
}

fn ok(event: &str, data: &str) -> Result<(String, String), String> {
    Ok((event.to_string(), data.to_string()))
}

#[tokio::test]
async fn framing_follows_the_spec() {
    let got = events(&[
        ": keep-alive\n\ndata:a\r\n\r",
        "\ndata: b\rdata: c\r\r",
        "event: error\ndata: {}\n\n",
    ])
    .await;
    assert_eq!(
        got,
        vec![ok("message", "a"), ok("message", "b\nc"), ok("error", "{}")]
    );
}

#[tokio::test]
async fn an_older_llama_cpp_error_field_is_an_error_event() {
    let body = "error: {\"code\":400,\"message\":\"the request exceeds the available context \
                size. try increasing the context size or enable context shift\",\"type\":\
                \"invalid_request_error\"}\n\ndata: [DONE]\n\n";
    let got = events(&[body]).await;
    let Some(Ok((event, data))) = got.first() else {
        panic!("no event: {got:?}");
    };
    assert_eq!(event, "error");
    match classify(&ev("error", data)) {
        Ok(SseItem::Error(info)) => {
            assert!(info.message.contains("exceeds the available context size"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn last_cr_terminated_event_is_not_lost() {
    let got = events(&["data: [DONE]\r\r"]).await;
    assert_eq!(got, vec![ok("message", "[DONE]")]);
}

#[tokio::test]
async fn a_body_that_is_not_utf8_is_malformed() {
    let got = events(&["data: \u{e9}\n\n", "data: ok\n\n"]).await;
    assert_eq!(got, vec![ok("message", "\u{e9}"), ok("message", "ok")]);
    let body = stream::iter([Ok::<_, std::io::Error>(b"data: \xC3\n\n".to_vec())]);
    let got: Vec<_> = frames(body, &Limits::default()).collect().await;
    assert!(
        matches!(&got[..], [Err(FrameError::Malformed(m))] if m.starts_with("the body is not UTF-8")),
        "{got:?}"
    );
}

#[tokio::test]
async fn body_over_the_response_limit_is_too_large() {
    let body = stream::iter([Ok::<_, std::io::Error>(vec![b'\n'; 64])]);
    let got: Vec<_> = frames(body, &limits(1024, 10)).collect().await;
    assert!(
        matches!(
            &got[..],
            [Err(FrameError::TooLarge(SizeLimit::Response {
                max_bytes: 10
            }))]
        ),
        "{got:?}"
    );
}

#[tokio::test]
async fn events_framed_before_an_oversized_one_come_out_first() {
    let mut body = b"data: 1\n\ndata: ".to_vec();
    body.extend(vec![b'x'; 300 * 1024]);
    let got: Vec<_> = frames(
        stream::iter([Ok::<_, std::io::Error>(body)]),
        &limits(100, 1 << 30),
    )
    .collect()
    .await;
    assert!(matches!(&got[0], Ok(e) if e.data == "1"), "{got:?}");
    assert!(
        matches!(
            &got[1..],
            [Err(FrameError::TooLarge(SizeLimit::Event {
                max_bytes: 65_736,
                max_turn_bytes: 100
            }))]
        ),
        "{got:?}"
    );
}

fn ev(event: &str, data: &str) -> SseEvent {
    SseEvent {
        event: event.to_owned().into(),
        data: data.into(),
    }
}

#[test]
fn classify_reads_done_errors_and_chunks() {
    assert!(matches!(
        classify(&ev("message", " [DONE] ")),
        Ok(SseItem::Done)
    ));
    assert!(matches!(
        classify(&ev("message", "{\"choices\":[]}")),
        Ok(SseItem::Chunk(_))
    ));
    assert!(matches!(classify(&ev("message", "1")), Ok(SseItem::Skip)));
    assert!(matches!(
        classify(&ev("message", "[1, {\"a\": null}]")),
        Ok(SseItem::Skip)
    ));
    assert!(classify(&ev("message", "oops"))
        .unwrap_err()
        .starts_with("data is not JSON"));
    assert!(classify(&ev("message", "{\"choices\": [}"))
        .unwrap_err()
        .starts_with("data is not JSON"));
    match classify(&ev(
        "error",
        "{\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}",
    )) {
        Ok(SseItem::Error(info)) => {
            assert_eq!(info.message, "Overloaded");
            assert_eq!(info.code.as_deref(), Some("overloaded_error"));
        }
        other => panic!("{other:?}"),
    }
    match classify(&ev("error", "upstream gone")) {
        Ok(SseItem::Error(info)) => assert_eq!(info.message, "upstream gone"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncate_cuts_at_a_character_boundary_and_marks_the_cut() {
    assert_eq!(truncate("short", 10), "short");
    // "é" takes bytes 1..3: a cut at 2 falls inside it and steps back to 1.
    assert_eq!(truncate("aéz", 2), "a…");
    assert_eq!(truncate("aéz", 3), "aé…");
}
