//! What a provider's own server says about a model's context window, for a rojo whose
//! config gives no `context_tokens` (`docs/configuration.md`, "Context window"): Ollama's
//! `/api/ps` and `/api/show`, LM Studio's `/api/v0/models`, and the model lists of the
//! services that carry a length. One module per source, one parsing function each;
//! [`Windows`] asks once per provider and model (a local server at every run: what it loaded
//! changes), within a short time, and keeps the answer.

mod cache;
mod groq;
mod lmstudio;
mod mistral;
mod ollama;
mod openrouter;
mod reported;
mod together;
mod vllm;

use rojos_llm::{Client, LlmError, ProviderKind, ServerPath};
use serde_json::Value;

pub use cache::Windows;
use reported::get;
pub use reported::{Reported, ASK_LIMIT};

/// Asks the provider of `client` (of `kind`) for its model's window: `Ok(None)` when it has
/// no way to tell, or does not list the model.
///
/// # Errors
///
/// The provider's failure to answer (unreachable, an error status, not JSON, too slow).
pub async fn ask(
    client: &Client,
    kind: Option<ProviderKind>,
) -> Result<Option<Reported>, LlmError> {
    let model = client.provider().model.as_str();
    match kind {
        Some(ProviderKind::Ollama) => ollama::ask(client, model).await,
        Some(ProviderKind::LmStudio) => {
            let body = get(client, ServerPath::Root("api/v0/models")).await?;
            Ok(lmstudio::window(&body, model))
        }
        Some(ProviderKind::OpenRouter) => listed(client, model, openrouter::window).await,
        Some(ProviderKind::Groq) => listed(client, model, groq::window).await,
        Some(ProviderKind::Mistral) => listed(client, model, mistral::window).await,
        Some(ProviderKind::Vllm) => listed(client, model, vllm::window).await,
        // An endpoint of no known kind: any list that carries a length, in any of the
        // known shapes (Together's among them).
        None => {
            listed(client, model, |body, model| {
                [
                    vllm::window,
                    openrouter::window,
                    groq::window,
                    mistral::window,
                    together::window,
                ]
                .iter()
                .find_map(|window| window(body, model))
            })
            .await
        }
        // Their lists carry no length: the table of well-known models tells.
        Some(_) => Ok(None),
    }
}

/// The window `parse` reads for `model` in the provider's `GET {base_url}/models`.
async fn listed(
    client: &Client,
    model: &str,
    parse: impl Fn(&Value, &str) -> Option<Reported>,
) -> Result<Option<Reported>, LlmError> {
    let body = get(client, ServerPath::Api("models")).await?;
    Ok(parse(&body, model))
}
