//! [`Fit`]: what a run knows about its model's window between turns: its size (made smaller
//! when the provider showed it is) and whether the server confirmed it loaded that much, the
//! measure learnt from the provider's usage, the size of the last request, and the newest
//! summary, read from the store once it is needed.

use rojos_conversations::Compaction;

use super::{Measure, Window, WindowSource};
use crate::rojo::RojoConfig;

/// A run's fitting state.
#[derive(Debug)]
pub(crate) struct Fit {
    /// The model's window.
    pub window: Window,
    /// The run's measure.
    pub measure: Measure,
    /// The estimated bytes of the last request sent.
    pub last_sent: usize,
    /// Its tokens, as the measure counted them.
    pub last_tokens: u64,
    /// The newest summary: `None` until read from the store.
    pub summary: Option<Option<Compaction>>,
    /// The index of the run's user message in its history.
    pub run_start: usize,
    /// How many stored messages come before the run's history: those the summary it was
    /// loaded with covers (`ConversationStore::resume`), never read by the run.
    pub offset: usize,
    /// The server said it loaded the model with at least `window` (a provider that cuts a
    /// request too long silently: until then, a turn's text is held until its usage shows
    /// the request was whole).
    pub confirmed: bool,
}

impl Fit {
    /// The state of a run to `model` whose user message is at `run_start`.
    pub(crate) fn new(window: Window, run_start: usize, model: &str) -> Fit {
        let measure = Measure::for_model(model);
        if let Some(tokenizer) = measure.tokenizer() {
            tracing::debug!(
                model,
                tokenizer = tokenizer.name(),
                "requests counted by tokenizer"
            );
        }
        Fit {
            window,
            measure,
            last_sent: 0,
            last_tokens: 0,
            summary: None,
            run_start,
            offset: 0,
            confirmed: window.source == WindowSource::Loaded,
        }
    }

    /// The server says it loaded the model with `tokens`: the window is no larger, and
    /// confirmed.
    pub(crate) fn loaded(&mut self, tokens: u64) {
        if tokens < self.window.tokens {
            self.window = Window {
                tokens,
                source: WindowSource::Loaded,
            };
        }
        self.confirmed = true;
    }

    /// Whether the rojo fits requests at all (`compact_at_percent` is not 0).
    pub(crate) fn enabled(&self, rojo: &RojoConfig) -> bool {
        rojo.compact_at_percent > 0
    }

    /// The provider refused the last request as over the window: plan for three quarters
    /// of what it was measured to take.
    pub(crate) fn overflowed(&mut self, model: &str) {
        let sent = self.last_tokens;
        let tokens = (sent * 3 / 4).clamp(super::MIN_CONTEXT_TOKENS / 2, self.window.tokens);
        tracing::warn!(
            model,
            context_tokens = self.window.tokens,
            now = tokens,
            "the provider refused the request as over its context window; fitting it again"
        );
        self.window.tokens = tokens;
    }

    /// Learns from the provider's `usage.prompt_tokens` of the last request; a provider
    /// that cuts a request too long silently (`cuts_silently`: Ollama) shows the window it
    /// really loaded. Any other provider refuses such a request with an error, so a count far
    /// below the estimate only means its tokenizer differs from the estimate. Whether the
    /// request was cut.
    pub(crate) fn learn(&mut self, prompt_tokens: u64, model: &str, cuts_silently: bool) -> bool {
        let kept = self.measure.learn(self.last_sent, prompt_tokens);
        let Some(kept) = kept.filter(|_| cuts_silently) else {
            return false;
        };
        self.cut(kept, prompt_tokens, model, WindowSource::Truncated);
        true
    }

    /// The provider cut the last request to `tokens` (it counted `prompt_tokens`): later
    /// requests are fitted to that.
    pub(crate) fn cut(
        &mut self,
        tokens: u64,
        prompt_tokens: u64,
        model: &str,
        source: WindowSource,
    ) {
        let tokens = tokens.min(self.window.tokens);
        tracing::warn!(
            model,
            sent_bytes = self.last_sent,
            prompt_tokens,
            context_tokens = self.window.tokens,
            now = tokens,
            "the provider counted far fewer prompt tokens than were sent: it cut the \
             request to its loaded context window; later turns are fitted to that"
        );
        self.window = Window { tokens, source };
    }
}
