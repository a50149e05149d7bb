//! What every source shares: the window a server told ([`Reported`]), the time a question
//! may take, and the reading of a model list.

use std::time::Duration;

use rojos_llm::{Client, LlmError, ServerPath};
use serde_json::Value;

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

/// `GET` `path` on the provider's server.
pub(super) async fn get(client: &Client, path: ServerPath<'_>) -> Result<Value, LlmError> {
    client.server_json(path, None, ASK_LIMIT).await
}

/// The entry of `model` in a model list: `{"data": [{"id": …}, …]}`, or a bare array.
pub(super) fn entry<'a>(body: &'a Value, model: &str) -> Option<&'a Value> {
    let list = body.get("data").unwrap_or(body).as_array()?;
    list.iter().find(|m| m["id"].as_str() == Some(model))
}

/// A positive token count in `value`.
pub(super) fn tokens(value: &Value) -> Option<u64> {
    value.as_u64().filter(|&n| n > 0)
}

/// A window read from a model list (the model's maximum, not what is loaded).
pub(super) fn from_list(tokens: u64, how: &str) -> Reported {
    Reported {
        tokens,
        loaded: false,
        how: how.to_owned(),
    }
}
