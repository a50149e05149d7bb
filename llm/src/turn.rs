//! What a model turn produces: `TurnEvent`s while streaming, then one complete `Turn` with
//! its text, finished tool calls, normalised finish reason and usage. Plain data; the
//! assembling is in `assemble.rs`, the history messages in `history.rs`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One item of a turn's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// Answer text, as it arrives. Never reasoning (`reasoning_content`, `reasoning`).
    TextDelta(String),
    /// The model started a tool call: its name is now known (its arguments may still be
    /// streaming). Comes once per call, before any `ToolCallProgress` of that call; sent
    /// again for the same `index` only when the request was retried from the start.
    ToolCallStarted {
        /// The call's position among the calls the model started in this turn (0-based,
        /// nameless fragments included), which `ToolCallProgress` repeats.
        index: usize,
        /// The provider's id when it came with the name (the finished call's id may differ:
        /// missing and duplicate ids are minted anew, see [`ToolCall::id`]).
        id: Option<String>,
        /// The tool name as the model wrote it.
        name: String,
    },
    /// The arguments of a started call grew: `bytes` is their whole length so far (not the
    /// increment). At most one per call per chunk; callers that forward these to people
    /// throttle them further.
    ToolCallProgress {
        /// The call's `ToolCallStarted::index`.
        index: usize,
        /// Bytes of arguments received so far (capped at `max_argument_bytes`).
        bytes: usize,
    },
    /// The complete turn; always the last item of a successful stream.
    Finished(Turn),
}

/// A complete model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// All answer text of the turn (the concatenation of every `TextDelta`).
    pub text: String,
    /// The tool calls, in the order the model started them.
    pub tool_calls: Vec<ToolCall>,
    /// Why the turn ended, decided from the content: any tool call makes it `ToolCalls`.
    pub finish_reason: FinishReason,
    /// The provider's own `finish_reason`, for logs (`None` when absent or `""`).
    pub finish_reason_raw: Option<String>,
    /// Token usage, when the provider sent it (the last one sent wins).
    pub usage: Option<Usage>,
}

impl Turn {
    /// True when the caller must run tools and ask the model again.
    pub fn wants_tools(&self) -> bool {
        !self.tool_calls.is_empty()
    }
}

/// One tool call, assembled from its stream fragments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id; minted as 9 alphanumerics when the provider's was empty, missing or a
    /// duplicate (the only shape Mistral accepts back).
    pub id: String,
    /// The tool name, as the model wrote it (never empty).
    pub name: String,
    /// The parsed arguments object, or why they are unusable, worded for the model
    /// (send it back as the tool result instead of running the tool).
    pub arguments: Result<Map<String, Value>, String>,
    /// The arguments text exactly as streamed (possibly truncated at the size limit).
    pub raw_arguments: String,
    /// Provider extras to echo back on this call in the next request, as a JSON object
    /// merged into the call (Gemini's `{"extra_content":{"google":{"thought_signature":…}}}`).
    pub extra: Option<Value>,
}

/// Why a turn ended, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// The model answered (`stop`, `end_turn`, or absent with `[DONE]`).
    Stop,
    /// The model wants tool results (at least one tool call was made).
    ToolCalls,
    /// The output hit the token limit (`length`, `max_tokens`).
    Length,
    /// The provider filtered the output (`content_filter`).
    ContentFilter,
    /// Anything else, as sent.
    Other(String),
}

impl FinishReason {
    /// Maps a wire `finish_reason`, acting on content: calls present means `ToolCalls`
    /// whatever the wire says (Gemini and old Ollama say `stop`), and a `tool_calls` reason
    /// without any call is a plain `Stop`.
    pub(crate) fn normalise(raw: Option<&str>, has_calls: bool) -> FinishReason {
        if has_calls {
            return FinishReason::ToolCalls;
        }
        match raw {
            None
            | Some("stop" | "end_turn" | "stop_sequence" | "eos" | "tool_calls")
            | Some("function_call" | "tool_use") => FinishReason::Stop,
            Some("length" | "max_tokens" | "model_length") => FinishReason::Length,
            Some("content_filter" | "safety" | "recitation") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
        }
    }
}

/// Token counts for one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Their sum (as reported, or computed when absent).
    pub total_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_wants_tools_exactly_when_it_has_calls() {
        let mut turn = Turn {
            text: "Let me look.".into(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            finish_reason_raw: Some("stop".into()),
            usage: None,
        };
        assert!(!turn.wants_tools());
        turn.tool_calls.push(ToolCall {
            id: "call_1".into(),
            name: "list_files".into(),
            arguments: Ok(serde_json::Map::new()),
            raw_arguments: "{}".into(),
            extra: None,
        });
        assert!(turn.wants_tools());
    }

    #[test]
    fn finish_reason_follows_content() {
        assert_eq!(
            FinishReason::normalise(Some("stop"), true),
            FinishReason::ToolCalls
        );
        assert_eq!(
            FinishReason::normalise(Some("tool_calls"), false),
            FinishReason::Stop
        );
        assert_eq!(FinishReason::normalise(None, false), FinishReason::Stop);
        assert_eq!(
            FinishReason::normalise(Some("length"), false),
            FinishReason::Length
        );
        assert_eq!(
            FinishReason::normalise(Some("weird"), false),
            FinishReason::Other("weird".into())
        );
    }
}
