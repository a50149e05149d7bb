//! The log on stderr: plain text (coloured only when stderr is a terminal and `NO_COLOR` is
//! not set) or one JSON object per line for log pipelines. `RUST_LOG` overrides the level
//! filter; without it the server logs `info` and the other commands only warnings, so their
//! own output is not buried under the server's start-up lines (see docs/configuration.md,
//! "Logs").
//!
//! The server's lines are written by a thread of their own (`tracing-appender`), never by the
//! thread that logs: a log reader that stops reading (a terminal paused with Ctrl-S, a stuck
//! log collector) fills stderr's pipe, and a write to a full pipe waits, which on a runtime
//! thread stopped every chat and request on it. Past [`BUFFERED_LINES`] waiting lines, new
//! ones are dropped and counted (`rojos_log_lines_dropped_total`).

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::{fmt::writer::BoxMakeWriter, EnvFilter};

/// How many of the server's lines may wait for stderr before new ones are dropped: about
/// 170 KB of `info` lines, a second of a busy server's log. The queue's slots are allocated
/// up front (32 bytes each), so a longer one would cost idle memory to hold what a stuck
/// reader would not take anyway.
pub const BUFFERED_LINES: usize = 1_024;

/// The server's count of dropped lines, once its log is set up.
static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the event's
    /// fields at the top level, and `spans`, the spans it happened in with their fields.
    Json,
}

/// How much is logged when `RUST_LOG` is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// The server: start-up, plugin loads, reloads, chats (`info`).
    Server,
    /// A command that prints its own output: only warnings and errors.
    Command,
}

impl Verbosity {
    fn default_filter(self) -> &'static str {
        match self {
            Verbosity::Server => "rojos=info,tower_http=info",
            // The provider client's retry warnings would repeat what `probe` reports.
            Verbosity::Command => "rojos=warn,rojos_llm=error,tower_http=warn",
        }
    }
}

/// Installs the process's log subscriber, writing to stderr: the server's through its own
/// writer thread, whose remaining lines are written when the returned guard is dropped (at
/// most about a second's wait); a command's directly.
pub fn init(format: LogFormat, verbosity: Verbosity) -> Option<WorkerGuard> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(verbosity.default_filter()));
    // Before stderr is handed to the writer thread: the test is about stderr itself.
    let ansi = colours_wanted();
    let (writer, guard) = match verbosity {
        Verbosity::Server => {
            let (writer, guard) = NonBlockingBuilder::default()
                .lossy(true)
                .buffered_lines_limit(BUFFERED_LINES)
                .thread_name("rojos-log")
                .finish(std::io::stderr());
            let _ = DROPPED.set(writer.error_counter());
            (BoxMakeWriter::new(writer), Some(guard))
        }
        Verbosity::Command => (BoxMakeWriter::new(std::io::stderr), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    guard
}

/// Lines the server dropped because stderr was not read fast enough (0 for a command).
pub fn dropped_lines() -> u64 {
    DROPPED
        .get()
        .map_or(0, |counter| counter.dropped_lines() as u64)
}

/// Colours only for a person at a terminal: never into a pipe or file, nor when `NO_COLOR`
/// is set (non-empty) (https://no-color.org).
fn colours_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}
