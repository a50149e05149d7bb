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
mod together;
mod vllm;

use std::time::Duration;

use rojos_llm::{Client, LlmError, ProviderKind, ServerPath};
use serde_json::Value;

pub use cache::Windows;

/// The longest one question to a provider may take; a chat waits no longer for it.
pub const ASK_LIMIT: Duration = Duration::from_secs(2);

/// A window the provider's server told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    /// Its size in tokens.
    pub tokens: u64,
    /// Whether it is what the server has loaded (or will load) the model with, rather than
    /// what a model list or the model's details say it can take.
    pub loaded: bool,
    /// Where it was read, for the log and `rojos probe` ("Ollama /api/ps").
    pub how: String,
}

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

/// `GET` `path` on the provider's server.
async fn get(client: &Client, path: ServerPath<'_>) -> Result<Value, LlmError> {
    client.server_json(path, None, ASK_LIMIT).await
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

/// The entry of `model` in a model list: `{"data": [{"id": …}, …]}`, or a bare array.
fn entry<'a>(body: &'a Value, model: &str) -> Option<&'a Value> {
    let list = body.get("data").unwrap_or(body).as_array()?;
    list.iter().find(|m| m["id"].as_str() == Some(model))
}

/// A positive token count in `value`.
fn tokens(value: &Value) -> Option<u64> {
    value.as_u64().filter(|&n| n > 0)
}

/// A window read from a model list (the model's maximum, not what is loaded).
fn from_list(tokens: u64, how: &str) -> Reported {
    Reported {
        tokens,
        loaded: false,
        how: how.to_owned(),
    }
}
