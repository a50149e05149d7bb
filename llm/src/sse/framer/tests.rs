//! The framer on its own: the spec's field rules under every split of the body, line ends
//! split across reads, the size cap (checked before buffering), and the linear scan.

use super::*;

fn ev(event: &str, data: &str) -> SseEvent {
    SseEvent {
        event: event.to_owned().into(),
        data: data.to_owned(),
    }
}

/// Frames `pieces` read by read, then ends the body.
fn frame(pieces: &[&[u8]], max: usize) -> Result<Vec<SseEvent>, FramingError> {
    let mut framer = Framer::new(max);
    let mut out = VecDeque::new();
    for piece in pieces {
        framer.feed(piece, &mut out)?;
    }
    framer.finish(&mut out);
    Ok(out.into())
}

/// Every rule the fixtures rely on, in one body: a BOM, a comment, `data` with and without
/// the space, a field without a colon, multi-line data, `event`, LF, CRLF and CR, a
/// multi-byte character, and a last event ended by CR only.
const BODY: &str = "\u{feff}: keep-alive\n\ndata:a\r\n\r\ndata: b\rdata: c\r\rdata\nevent: error\n\
                    data: {\"é\":\"ü€\"}\n\nid: 7\nretry: 10\ndata: [DONE]\r\r";

fn expected() -> Vec<SseEvent> {
    vec![
        ev("message", "a"),
        ev("message", "b\nc"),
        ev("error", "\n{\"é\":\"ü€\"}"),
        ev("message", "[DONE]"),
    ]
}

#[test]
fn the_spec_rules_hold_whole_and_split_at_every_byte() {
    let body = BODY.as_bytes();
    assert_eq!(frame(&[body], 1024).unwrap(), expected());
    for at in 0..=body.len() {
        let got = frame(&[&body[..at], &body[at..]], 1024).unwrap();
        assert_eq!(got, expected(), "split at byte {at}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(
        frame(&bytes, 1024).unwrap(),
        expected(),
        "one byte at a time"
    );
}

#[test]
fn a_cr_ending_one_read_and_an_lf_opening_the_next_are_one_line_end() {
    // Were the LF a second line end, the blank line would split the event in two.
    let got = frame(
        &[b"data: a\r".as_slice(), b"\ndata: b\n\n".as_slice()],
        1024,
    )
    .unwrap();
    assert_eq!(got, vec![ev("message", "a\nb")]);
    // An empty read in between changes nothing.
    let got = frame(
        &[
            b"data: a\r".as_slice(),
            b"".as_slice(),
            b"\ndata: b\n\n".as_slice(),
        ],
        1024,
    )
    .unwrap();
    assert_eq!(got, vec![ev("message", "a\nb")]);
}

#[test]
fn the_end_of_the_body_completes_a_last_event_but_drops_an_unfinished_line() {
    assert_eq!(
        frame(&[b"data: [DONE]\n".as_slice()], 1024).unwrap(),
        vec![ev("message", "[DONE]")]
    );
    assert_eq!(
        frame(&[b"data: [DONE]\r".as_slice()], 1024).unwrap(),
        Vec::<SseEvent>::new(),
        "a single CR at the end stands for CRLF, not for a blank line"
    );
    assert_eq!(
        frame(&[b"data: 1\n\ndata: {\"cut".as_slice()], 1024).unwrap(),
        vec![ev("message", "1")]
    );
}

#[test]
fn a_bom_is_dropped_only_at_the_start() {
    let got = frame(
        &[
            b"\xEF\xBB".as_slice(),
            b"\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n".as_slice(),
        ],
        1024,
    )
    .unwrap();
    // The second BOM makes the field name `\u{feff}data`, an unknown field.
    assert_eq!(got, vec![ev("message", "a")]);
}

#[test]
fn a_line_that_is_not_utf8_is_refused() {
    let got = frame(&[b"data: \xFF\n\n".as_slice()], 1024);
    assert!(matches!(got, Err(FramingError::NotUtf8(_))), "{got:?}");
}

#[test]
fn a_long_line_is_refused_before_more_than_the_cap_is_buffered() {
    let max = 10_000;
    let mut framer = Framer::new(max);
    let mut out = VecDeque::new();
    let read = [b'x'; 300];
    let mut fed = 0;
    let error = loop {
        match framer.feed(&read, &mut out) {
            Ok(()) => fed += read.len(),
            Err(e) => break e,
        }
        assert!(framer.partial.capacity() <= max, "buffer past the cap");
    };
    assert!(matches!(error, FramingError::EventTooLarge));
    assert!(
        fed <= max && fed + read.len() > max,
        "refused at {fed} bytes"
    );
    // A line arriving whole in one read is held to the same cap.
    let long = format!("data: {}\n\n", "y".repeat(max));
    assert!(matches!(
        frame(&[long.as_bytes()], max),
        Err(FramingError::EventTooLarge)
    ));
}

#[test]
fn data_accumulated_over_many_lines_is_held_to_the_cap() {
    let line = format!("data: {}\n", "z".repeat(90));
    let body = line.repeat(20); // 20 short lines, 1,819 bytes of data, no blank line
    assert!(matches!(
        frame(&[body.as_bytes()], 1_000),
        Err(FramingError::EventTooLarge)
    ));
    let got = frame(&[body.as_bytes(), b"\n".as_slice()], 2_000).unwrap();
    assert_eq!(got[0].data.len(), 20 * 90 + 19);
}

#[test]
fn a_multi_megabyte_event_in_small_reads_scans_each_byte_once() {
    // 8 MB of data in one line, read 64 bytes at a time: a parser that re-scans its buffer
    // from the start on each read examines ~500 GB here; this one examines each byte once.
    let payload = "0123456789abcdef".repeat(512 * 1024);
    let body = format!(": ping\r\ndata: {payload}\r\n\r\n");
    let mut framer = Framer::new(16 << 20);
    let mut out = VecDeque::new();
    for read in body.as_bytes().chunks(64) {
        framer.feed(read, &mut out).unwrap();
    }
    framer.finish(&mut out);
    assert_eq!(framer.scanned(), body.len() as u64);
    assert_eq!(out.len(), 1);
    assert!(out[0].data == payload);
}

#[test]
fn a_line_of_exactly_the_cap_is_framed_and_one_byte_more_is_refused() {
    let max = 64;
    let exact = format!("data: {}\n\n", "x".repeat(max - "data: ".len()));
    let got = frame(&[exact.as_bytes()], max).unwrap();
    assert_eq!(got[0].data.len(), max - "data: ".len());
    let over = format!("data: {}\n\n", "x".repeat(max + 1 - "data: ".len()));
    assert!(matches!(
        frame(&[over.as_bytes()], max),
        Err(FramingError::EventTooLarge)
    ));
}

#[test]
fn the_newline_joining_data_lines_counts_toward_the_cap_exactly() {
    // Two lines of 20 bytes joined by LF: 41 bytes of data.
    let body = format!("data: {}\ndata: {}\n\n", "a".repeat(20), "b".repeat(20));
    let got = frame(&[body.as_bytes()], 41).unwrap();
    assert_eq!(
        got[0].data,
        format!("{}\n{}", "a".repeat(20), "b".repeat(20))
    );
    assert!(matches!(
        frame(&[body.as_bytes()], 40),
        Err(FramingError::EventTooLarge)
    ));
}
