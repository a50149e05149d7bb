//! How a tool call ended when it did not succeed: the kind of failure, kept typed (the
//! plugin's own [`ErrorKind`], or why the host did not run or finish it), and the message,
//! from which the text the model reads is made in one place ([`model_text`]).

use rojos_plugin_api::ErrorKind;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// The plugin ran and reported this kind.
    Plugin(ErrorKind),
    /// The host did not run it: unusable arguments or ones that do not fit the schema.
    InvalidArguments,
    /// The host did not run it: an unknown or disabled tool, a budget, a repeated call, a
    /// cancelled run.
    Refused,
    /// Too many of the tool's calls were still running.
    Busy,
    /// The call did not finish in time: its worker was ended (or, in-process, its thread
    /// abandoned).
    Timeout,
    /// The host could not run or finish it (the tool was unloaded, its thread failed).
    Host,
    /// The plugin's worker died (crashed, exited, ran out of memory) while running it.
    Crashed,
}

/// A failed call: its kind, and what went wrong for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The class of failure.
    pub kind: FailureKind,
    /// What went wrong, worded for the model.
    pub message: String,
}

impl ToolFailure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> ToolFailure {
        ToolFailure {
            kind,
            message: message.into(),
        }
    }
}

/// What a call gives: the tool's result text, or why it failed.
pub type ToolOutcome = Result<String, ToolFailure>;

/// The text the model (and the client) is given for a call: the result, or `error: why`.
pub fn model_text(outcome: ToolOutcome) -> String {
    match outcome {
        Ok(text) => text,
        Err(failure) => format!("error: {}", failure.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_results_say_so() {
        let failure = ToolFailure::new(
            FailureKind::Plugin(ErrorKind::NOT_FOUND),
            "path 'x' not found",
        );
        assert_eq!(model_text(Err(failure)), "error: path 'x' not found");
        assert_eq!(model_text(Ok("[]".to_owned())), "[]");
    }
}
