//! [`Limits`]: the size limits of one turn, read by the stream's framing and assembly and
//! set on a [`Provider`](crate::Provider).

/// Size limits protecting memory from a runaway or hostile stream. Nothing of a response is
/// kept but what a turn is made of, so a turn holds memory in proportion to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest text plus tool calls (ids, names, arguments) of one turn, as assembled; a
    /// larger turn fails with [`LlmError::TooLarge`](crate::LlmError::TooLarge). Also sets
    /// [`Limits::max_event_bytes`].
    pub max_turn_bytes: usize,
    /// Largest `arguments` text of one tool call; a larger call gets an error result (the
    /// turn goes on). Meant to be at most `max_turn_bytes`.
    pub max_argument_bytes: usize,
    /// Most bytes read from one response, SSE or JSON. They are not kept (see
    /// `max_event_bytes`): this bounds the work of one turn, e.g. a stream of empty chunks.
    pub max_response_bytes: usize,
    /// How much of an HTTP error body is read to find the provider's message.
    pub max_error_body_bytes: usize,
}

impl Limits {
    /// The largest SSE line, event data or JSON answer: twice `max_turn_bytes` plus 64 KiB.
    ///
    /// A turn's text and arguments arrive JSON-escaped inside events, and escaping about
    /// doubles text at worst in practice (`"` `\` and newlines become two bytes; a character
    /// sent as `\uXXXX` takes six bytes for its two or three); the 64 KiB hold a chunk's own
    /// fields (ids, model, usage, Gemini's thought signatures). An event past this cap can
    /// only belong to a turn past `max_turn_bytes`, so it is refused before it is buffered.
    pub fn max_event_bytes(&self) -> usize {
        self.max_turn_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turn_bytes: 2 * 1024 * 1024,
            max_argument_bytes: 1024 * 1024 + 64 * 1024,
            max_response_bytes: 64 * 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
        }
    }
}
