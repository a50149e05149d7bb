//! One sentence for the user when a provider cannot be used or fails: what failed and what to
//! do ("Ollama is not running at 127.0.0.1:11434: start it with `ollama serve`, or set another
//! provider in rojos.toml"). The technical detail goes to the log, not into these sentences.

use rojos_llm::LlmError;

use super::ProviderRef;

/// What to tell the user when a model turn with `provider` failed with `error`.
pub fn for_error(provider: &ProviderRef, error: &LlmError) -> String {
    // Groundwork: the classification by failure (unreachable, wrong key, unknown model, rate
    // limited, context too long, the provider's own message) replaces this.
    let _ = provider;
    crate::agent::error_chain(error)
}

/// What to tell the user when `provider`'s API key variable is not set.
pub fn missing_key(provider: &ProviderRef) -> String {
    let var = provider
        .key_env
        .as_deref()
        .unwrap_or("its API key variable");
    format!(
        "{} has no API key: set {var} in the server's environment and restart it, or set another provider in rojos.toml",
        provider.label()
    )
}
