//! [`Run::cut_silently`]: whether the provider cut the last request to a smaller window
//! than planned for without an error (Ollama does so: only the usage chunk's
//! `prompt_tokens` tells), and the window planned for from then on. Until the server said it
//! loaded the model with the window planned for, such a provider's turns are held back
//! ([`Run::holds_turns`]) so a turn made from a cut request is asked again, not shown.

use rojos_llm::Turn;

use super::Run;
use crate::context::WindowSource;

/// The share of the loaded window, in tenths, a cut request's count fills at least: Ollama
/// keeps as much of a request as its window takes.
const FILLED_TENTHS: u64 = 9;

impl Run<'_> {
    /// The provider cuts a request too long without an error.
    fn cuts_without_error(&self) -> bool {
        self.request.provider.kind == Some(rojos_llm::ProviderKind::Ollama)
    }

    /// Whether the next turn's text and live status are held back until its usage shows
    /// the request was whole: the provider cuts silently and the window is not confirmed.
    pub(super) fn holds_turns(&self) -> bool {
        self.cuts_without_error() && self.fit.enabled(&self.request.rojo) && !self.fit.confirmed
    }

    /// Learns from the turn's usage; whether the provider cut its request. A provider that
    /// cuts silently is asked what it loaded the model with (it is loaded now) while the
    /// window is not confirmed, or when the count shows a cut: that is the window from now on.
    pub(super) async fn cut_silently(&mut self, turn: &Turn) -> bool {
        let Some(usage) = turn.usage else {
            return false;
        };
        let silent = self.cuts_without_error();
        let model = self.request.provider.model.as_str();
        let before = self.fit.measure;
        let mut cut = self.fit.learn(usage.prompt_tokens, model, silent);
        if !silent || !self.fit.enabled(&self.request.rojo) {
            return false;
        }
        if self.fit.confirmed && !cut {
            return false;
        }
        let told = self
            .agent
            .windows
            .lookup(&self.request.provider, &self.request.client, true)
            .await;
        if let Some(loaded) = told.filter(|r| r.loaded).map(|r| r.tokens) {
            let sent = before.tokens(self.fit.last_sent);
            if !cut && usage.prompt_tokens * 10 >= loaded * FILLED_TENTHS && sent > loaded {
                // Nothing is learnt about the tokenizer from a request that was cut.
                self.fit.measure = before;
                self.fit
                    .cut(loaded, usage.prompt_tokens, model, WindowSource::Loaded);
                cut = true;
            }
            self.fit.loaded(loaded);
        }
        cut
    }

    /// The warning for a cut request: `retried`, the turn is being asked again.
    pub(super) fn cut_message(&self, retried: bool) -> String {
        let provider = &self.request.provider;
        let tokens = self.fit.window.tokens;
        let what = format!(
            "{} ({}) cut the request to its loaded context window of about {tokens} tokens \
             without an error",
            provider.label(),
            provider.model
        );
        let then = if retried {
            "its answer was set aside and the request fitted to that window and sent again"
        } else {
            "the answer above may have missed earlier messages; later turns are fitted to it"
        };
        format!(
            "{what}: {then}. To give the model more, see docs/configuration.md, \"Context \
             window\" (OLLAMA_CONTEXT_LENGTH, or a Modelfile's num_ctx)"
        )
    }
}
