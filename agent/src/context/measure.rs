//! A request's size in tokens: counted with the model's own tokenizer where it is known
//! (OpenAI's models, `super::tokenizer`), else estimated from its bytes: three bytes a token
//! to start with (JSON and code run shorter than English prose's four), then the ratio the
//! provider's own `usage.prompt_tokens` showed for earlier requests of the run. A provider
//! that reports far fewer prompt tokens than the bytes sent can hold cut the request to the
//! window it loaded (Ollama does so silently): that window is what later turns plan for.
//! Sizes in bytes (how much of a message to keep) always use the ratio.

use super::tokenizer::Tokenizer;

/// Bytes per token before the provider said anything.
const START_BYTES_PER_TOKEN: f64 = 3.0;

/// No tokenizer packs more bytes into a token: a report above it means the provider cut
/// the request.
const MAX_BYTES_PER_TOKEN: f64 = 8.0;

/// The run's measure of requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measure {
    bytes_per_token: f64,
    /// The model's tokenizer, when known.
    tokenizer: Option<Tokenizer>,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            bytes_per_token: START_BYTES_PER_TOKEN,
            tokenizer: None,
        }
    }
}

impl Measure {
    /// The measure of requests to `model`: its tokenizer where known, else the estimate.
    pub(crate) fn for_model(model: &str) -> Measure {
        Measure {
            tokenizer: Tokenizer::for_model(model),
            ..Measure::default()
        }
    }

    /// The model's tokenizer, when known.
    pub(crate) fn tokenizer(&self) -> Option<Tokenizer> {
        self.tokenizer
    }

    /// The tokens of `bytes` of request, rounded up.
    pub(crate) fn tokens(&self, bytes: usize) -> u64 {
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }

    /// The bytes `tokens` hold, rounded down.
    pub(crate) fn bytes(&self, tokens: u64) -> usize {
        (tokens as f64 * self.bytes_per_token) as usize
    }

    /// Learns from a request of `sent` bytes the provider counted as `prompt_tokens`.
    /// Returns the tokens it kept when it must have cut the request (fewer than the bytes
    /// sent can hold), without learning from that report.
    pub(crate) fn learn(&mut self, sent: usize, prompt_tokens: u64) -> Option<u64> {
        if prompt_tokens == 0 || sent < 4_096 {
            return None;
        }
        let ratio = sent as f64 / prompt_tokens as f64;
        if ratio > MAX_BYTES_PER_TOKEN {
            return Some(prompt_tokens);
        }
        // A tenth kept in hand, and never more than four bytes a token: an underestimate
        // only costs an earlier compaction, an overestimate a failed turn.
        self.bytes_per_token = (ratio * 0.9).clamp(1.0, 4.0);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_corrects_the_estimate_and_a_cut_request_is_told() {
        let mut m = Measure::default();
        assert_eq!(m.tokens(3_000), 1_000);
        assert_eq!(m.learn(20_000, 10_000), None);
        assert_eq!(m.tokens(1_800), 1_000);
        // 100,000 bytes cannot be 2,048 tokens: the provider kept only those.
        assert_eq!(m.learn(100_000, 2_048), Some(2_048));
        assert_eq!(m.tokens(1_800), 1_000, "nothing learnt from a cut request");
    }
}
