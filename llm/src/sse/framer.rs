//! The SSE framer: response bytes → events, following the HTML spec's event-stream rules
//! (LF, CR and CRLF line ends; `field: value` with one optional space; multi-line `data`
//! joined by LF; `event`; comments; a leading BOM; a field without a colon), plus the
//! `error` field of older llama.cpp servers, read as an `event: error`. Synchronous and
//! linear: each byte is scanned for a line end once, and no line or event's data may pass
//! `max_event_bytes`, checked before anything more is buffered. Meaning is `sse.rs`'s job.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem;

/// Buffers larger than this are released after use instead of kept for the next line.
const KEEP_CAPACITY: usize = 64 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event` field, `message` when absent (not allocated: nearly every event has none).
    pub(crate) event: Cow<'static, str>,
    /// The `data` lines, joined by LF.
    pub(crate) data: String,
}

/// Why the bytes cannot be framed.
#[derive(Debug)]
pub(crate) enum FramingError {
    /// A line, or the data of one event, is longer than the cap.
    EventTooLarge,
    /// A line is not UTF-8.
    NotUtf8(std::str::Utf8Error),
}

/// Splits a body into events, one read at a time.
#[derive(Debug)]
pub(crate) struct Framer {
    max_event_bytes: usize,
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// The previous read ended with CR: an LF opening this one belongs to that line end.
    after_cr: bool,
    /// No line has ended yet: a leading BOM is dropped from it.
    first_line: bool,
    /// The `event` field of the event being built.
    event_type: String,
    /// The data of the event being built.
    data: String,
    /// A `data` field was seen (`data:` alone makes an event with empty data).
    has_data: bool,
    /// Bytes examined for a line end, over the framer's life (each byte once).
    scanned: u64,
}

impl Framer {
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Framer {
            max_event_bytes,
            partial: Vec::new(),
            after_cr: false,
            first_line: true,
            event_type: String::new(),
            data: String::new(),
            has_data: false,
            scanned: 0,
        }
    }

    /// How many bytes were examined for a line end so far.
    #[cfg(test)]
    pub(crate) fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Frames one read, appending the events it completes to `out`.
    ///
    /// # Errors
    /// An oversized line or event, or a line that is not UTF-8; the framer is then spent.
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), FramingError> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            bytes = self.skip_lf(bytes);
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.scanned += at as u64 + 1;
            self.end_line(&bytes[..at], out)?;
            let ending = bytes[at];
            bytes = &bytes[at + 1..];
            if ending == b'\r' {
                // CRLF is one line end; a CR last in this read is settled by the next byte.
                match bytes.first() {
                    Some(_) => bytes = self.skip_lf(bytes),
                    None => self.after_cr = true,
                }
            }
        }
        self.scanned += bytes.len() as u64;
        self.keep_partial(bytes)
    }

    /// The end of the body: a complete last line counts as followed by a blank one (so a
    /// last event without its blank line is not lost); an incomplete line is dropped.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<SseEvent>) {
        if self.partial.is_empty() && !self.after_cr {
            self.dispatch(out);
        }
    }

    fn skip_lf<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        match bytes.split_first() {
            Some((b'\n', rest)) => {
                self.scanned += 1;
                rest
            }
            _ => bytes,
        }
    }

    /// A line end arrived: `tail` completes the buffered start of the line.
    fn end_line(&mut self, tail: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), FramingError> {
        if self.partial.is_empty() {
            self.check_size(tail.len())?;
            return self.take_line(tail, out);
        }
        self.check_size(self.partial.len() + tail.len())?;
        let mut line = mem::take(&mut self.partial);
        line.extend_from_slice(tail);
        let taken = self.take_line(&line, out);
        if line.capacity() <= KEEP_CAPACITY {
            line.clear();
            self.partial = line;
        }
        taken
    }

    /// Buffers the start of a line, within the cap.
    fn keep_partial(&mut self, bytes: &[u8]) -> Result<(), FramingError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let len = self.partial.len() + bytes.len();
        self.check_size(len)?;
        let extra = growth(
            self.partial.len(),
            self.partial.capacity(),
            len,
            self.max_event_bytes,
        );
        self.partial.reserve_exact(extra);
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    fn check_size(&self, len: usize) -> Result<(), FramingError> {
        if len > self.max_event_bytes {
            return Err(FramingError::EventTooLarge);
        }
        Ok(())
    }

    /// Applies one complete line (without its line end).
    fn take_line(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), FramingError> {
        let mut line = std::str::from_utf8(line).map_err(FramingError::NotUtf8)?;
        if mem::take(&mut self.first_line) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (keep-alives such as OpenRouter's `: OPENROUTER PROCESSING`)
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => self.append_data(value)?,
            "event" => value.clone_into(&mut self.event_type),
            // Not a field of the spec: llama.cpp's server before its late-2025 rewrite
            // reported a failed request as `error: {json}` (then `data: [DONE]`). Ignored as
            // the spec says, its message would be lost and the turn look empty; read as an
            // `event: error` instead.
            "error" => {
                "error".clone_into(&mut self.event_type);
                self.append_data(value)?;
            }
            // `id` and `retry` serve reconnection, which a model turn never does.
            _ => {}
        }
        Ok(())
    }

    fn append_data(&mut self, value: &str) -> Result<(), FramingError> {
        let len = self.data.len() + usize::from(self.has_data) + value.len();
        self.check_size(len)?;
        let extra = growth(
            self.data.len(),
            self.data.capacity(),
            len,
            self.max_event_bytes,
        );
        self.data.reserve_exact(extra);
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
        Ok(())
    }

    /// A blank line: the event built so far, if it has data, goes out.
    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        let event = mem::take(&mut self.event_type);
        if !mem::take(&mut self.has_data) {
            return;
        }
        out.push_back(SseEvent {
            event: if event.is_empty() {
                Cow::Borrowed("message")
            } else {
                Cow::Owned(event)
            },
            data: mem::take(&mut self.data),
        });
    }
}

/// How much to reserve so a buffer of `len` bytes can hold `needed`: doubling as a `Vec`
/// would, but never past `max`, so a buffer near the cap is not twice the cap.
fn growth(len: usize, capacity: usize, needed: usize, max: usize) -> usize {
    if needed <= capacity {
        return 0;
    }
    needed.max(capacity.saturating_mul(2)).min(max) - len
}

#[cfg(test)]
mod tests;
