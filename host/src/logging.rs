//! The log on stderr: plain text (coloured only when stderr is a terminal and `NO_COLOR` is
//! not set) or one JSON object per line for log pipelines. `RUST_LOG` overrides the level
//! filter; without it the server logs `info` and the other commands only warnings, so their
//! own output is not buried under the server's start-up lines (see docs/configuration.md,
//! "Logs").

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

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

/// Installs the process's log subscriber, writing to stderr.
pub fn init(format: LogFormat, verbosity: Verbosity) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(verbosity.default_filter()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(colours_wanted()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

/// Colours only for a person at a terminal: never into a pipe or file, nor when `NO_COLOR`
/// is set (non-empty) (https://no-color.org).
fn colours_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}
