//! A worker's stderr, read for the server's log ([`tail`]): each line becomes a WARN line
//! naming the plugin, and the last one is kept to name the cause of a death (Rust's "memory
//! allocation of N bytes failed"). A plugin's code writes there, so the reading never stops
//! and never grows: a line is kept to its first [`MAX_LINE_BYTES`] and logged once they have
//! come (so one that never ends costs the server no more, and is still seen), bytes that are
//! not UTF-8 are replaced, and at most [`LINES_PER_MINUTE`] lines a minute are logged, the
//! rest counted.
//!
//! Written by hand rather than with `AsyncBufReadExt::lines` or tokio-util's `LinesCodec`:
//! both end the stream at bytes that are not UTF-8 (after which nobody reads the pipe, and the
//! worker blocks once it is full), and `lines` holds a line whole, however long it is.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How much of one line is kept; the rest of it is read and dropped.
pub const MAX_LINE_BYTES: usize = 1024;

/// How many characters of a line the log shows.
const SHOWN_CHARS: usize = 300;

/// How many lines of one worker's stderr are logged in a minute.
pub const LINES_PER_MINUTE: u32 = 100;

const MINUTE: Duration = Duration::from_secs(60);

/// Reads `stderr` to its end on a task of its own, logging its lines as the plugin `label`'s;
/// the task returns the last line that is not Rust's backtrace hint.
pub fn tail(
    stderr: impl AsyncRead + Unpin + Send + 'static,
    label: String,
) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(stderr);
        let mut cutter = Cutter::new(label);
        loop {
            let buffer = match reader.fill_buf().await {
                Ok([]) | Err(_) => break,
                Ok(buffer) => buffer,
            };
            let used = cutter.feed(buffer);
            reader.consume(used);
        }
        cutter.finish()
    })
}

/// [`tail`] on a thread of its own, for a blocking reader (the manifest probe's pipe, read
/// while the server loads a library, perhaps before its runtime runs).
///
/// # Errors
///
/// The thread cannot be started.
pub fn tail_blocking(
    stderr: impl std::io::Read + Send + 'static,
    label: String,
) -> std::io::Result<std::thread::JoinHandle<String>> {
    std::thread::Builder::new()
        .name("plugin-stderr".to_owned())
        .spawn(move || {
            let mut reader = std::io::BufReader::new(stderr);
            let mut cutter = Cutter::new(label);
            loop {
                let buffer = match std::io::BufRead::fill_buf(&mut reader) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok([]) | Err(_) => break,
                    Ok(buffer) => buffer,
                };
                let used = cutter.feed(buffer);
                std::io::BufRead::consume(&mut reader, used);
            }
            cutter.finish()
        })
}

/// Cuts what is read into lines, keeping each to [`MAX_LINE_BYTES`].
struct Cutter {
    log: Lines,
    line: Vec<u8>,
    /// The line reached its kept length and was logged; the rest of it is dropped.
    logged_early: bool,
}

impl Cutter {
    fn new(label: String) -> Cutter {
        Cutter {
            log: Lines::new(label),
            line: Vec::new(),
            logged_early: false,
        }
    }

    /// Takes `buffer` up to and with its first line end (all of it when there is none);
    /// returns how many bytes it took.
    fn feed(&mut self, buffer: &[u8]) -> usize {
        let end = buffer.iter().position(|&b| b == b'\n');
        let part = &buffer[..end.unwrap_or(buffer.len())];
        let room = MAX_LINE_BYTES - self.line.len();
        self.line.extend_from_slice(&part[..part.len().min(room)]);
        if self.line.len() == MAX_LINE_BYTES && !self.logged_early {
            // Logged now: a line that never ends is still seen.
            self.log.line(&self.line);
            self.logged_early = true;
        }
        if end.is_some() {
            if !self.logged_early {
                self.log.line(&self.line);
            }
            self.line.clear();
            self.logged_early = false;
        }
        end.map_or(buffer.len(), |at| at + 1)
    }

    fn finish(mut self) -> String {
        if !self.line.is_empty() && !self.logged_early {
            self.log.line(&self.line);
        }
        self.log.finish()
    }
}

/// The lines of one worker's stderr, logged at a bounded rate.
struct Lines {
    label: String,
    /// The last line that says something (not Rust's hint about backtraces).
    last: String,
    /// When the current minute began, and how many lines came in it.
    minute: Instant,
    in_minute: u32,
    /// Lines read but not logged, not reported yet.
    unlogged: u64,
}

impl Lines {
    fn new(label: String) -> Lines {
        Lines {
            label,
            last: String::new(),
            minute: Instant::now(),
            in_minute: 0,
            unlogged: 0,
        }
    }

    fn line(&mut self, bytes: &[u8]) {
        let text: String = String::from_utf8_lossy(bytes)
            .chars()
            .take(SHOWN_CHARS)
            .collect();
        if self.minute.elapsed() >= MINUTE {
            self.report_unlogged();
            self.minute = Instant::now();
            self.in_minute = 0;
        }
        self.in_minute += 1;
        if self.in_minute <= LINES_PER_MINUTE {
            tracing::warn!(plugin = %self.label, "plugin worker: {text}");
        } else {
            if self.in_minute == LINES_PER_MINUTE + 1 {
                tracing::warn!(plugin = %self.label, "plugin worker: more than {LINES_PER_MINUTE} lines on stderr within a minute; the rest of this minute's are counted, not logged");
            }
            self.unlogged += 1;
        }
        if !text.starts_with("note: ") {
            self.last = text;
        }
    }

    fn report_unlogged(&mut self) {
        if self.unlogged > 0 {
            tracing::warn!(plugin = %self.label, unlogged = self.unlogged, "plugin worker: {} lines of its stderr were not logged", self.unlogged);
            self.unlogged = 0;
        }
    }

    fn finish(mut self) -> String {
        self.report_unlogged();
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `tail` returns for `bytes` written to a pipe and closed.
    async fn last_line_of(bytes: Vec<u8>) -> String {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let tail = tail(reader, "test".to_owned());
        tokio::io::AsyncWriteExt::write_all(&mut writer, &bytes)
            .await
            .unwrap();
        drop(writer);
        tail.await.unwrap()
    }

    #[tokio::test]
    async fn the_last_line_that_says_something_is_kept() {
        let text =
            b"first\nmemory allocation of 8 bytes failed\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            last_line_of(text.to_vec()).await,
            "memory allocation of 8 bytes failed"
        );
        assert_eq!(last_line_of(b"no end".to_vec()).await, "no end");
    }

    #[tokio::test]
    async fn a_line_is_kept_to_its_start_and_reading_goes_on_past_it() {
        let mut text = vec![b'e'; 4 * MAX_LINE_BYTES];
        text.extend_from_slice(b"\nthe next line\n");
        assert_eq!(last_line_of(text).await, "the next line");
        let endless = last_line_of(vec![b'e'; 1 << 20]).await;
        assert_eq!(endless, "e".repeat(SHOWN_CHARS));
    }

    #[tokio::test]
    async fn bytes_that_are_not_utf8_are_replaced_and_reading_goes_on() {
        let text = b"\xff\xfe broken\nafter it\n".to_vec();
        assert_eq!(last_line_of(text).await, "after it");
        assert_eq!(last_line_of(b"\xffx".to_vec()).await, "\u{fffd}x");
    }

    #[test]
    fn the_blocking_reader_cuts_lines_alike() {
        let mut text = vec![b'e'; 4 * MAX_LINE_BYTES];
        text.extend_from_slice(b"\n\xff after\nnote: a hint\n");
        let tail = tail_blocking(std::io::Cursor::new(text), "test".to_owned()).unwrap();
        assert_eq!(tail.join().unwrap(), "\u{fffd} after");
    }

    #[test]
    fn past_the_minute_s_lines_the_rest_are_counted_not_logged() {
        let mut lines = Lines::new("test".to_owned());
        for n in 0..LINES_PER_MINUTE + 5 {
            lines.line(format!("line {n}").as_bytes());
        }
        assert_eq!(lines.unlogged, 5);
        assert_eq!(lines.last, format!("line {}", LINES_PER_MINUTE + 4));
        // A new minute logs again and reports what was left out.
        lines.minute -= MINUTE;
        lines.line(b"later");
        assert_eq!((lines.in_minute, lines.unlogged), (1, 0));
    }
}
