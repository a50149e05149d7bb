//! One provider's check: its model list (`GET {base_url}/models`), read into a [`Status`]
//! with the fix when it cannot be used. A provider whose key is missing is never contacted.
//! When to check, and what to do with the result, is `monitor.rs`'s and `status.rs`'s job.
//!
//! Only what shows that a chat cannot work makes a provider unavailable: no key, no
//! connection, no answer in time, a refused key, a model it does not offer. Any other
//! answer (a server without `/models`, a 5xx, a rate limit) leaves it ready: the chat itself
//! then says what failed (see docs/configuration.md, "Provider checks").

use rojos_llm::{Client, LlmError, ModelList};
use serde::Serialize;

use super::{advice, ProviderRef};
use crate::live::LiveProvider;

/// A provider's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Status {
    /// Not known yet: the first check is running.
    Checking,
    /// Reachable, its key accepted, its model offered.
    Ready {
        /// The model it is asked for.
        model: String,
    },
    /// It cannot be used now.
    Unavailable {
        /// What is wrong and how to fix it, in one sentence.
        fix: String,
    },
}

/// What one check found.
#[derive(Debug)]
pub struct Checked {
    /// The provider's status.
    pub status: Status,
    /// For a provider whose model is taken from its list: the client for the model found.
    pub client: Option<Client>,
    /// The technical detail behind an unavailable status, for the log.
    pub detail: Option<String>,
}

impl Checked {
    fn ready(model: String, client: Option<Client>) -> Checked {
        Checked {
            status: Status::Ready { model },
            client,
            detail: None,
        }
    }

    fn unavailable(fix: String, detail: Option<String>) -> Checked {
        Checked {
            status: Status::Unavailable { fix },
            client: None,
            detail,
        }
    }
}

/// Checks provider `name`.
pub async fn check(name: &str, provider: &LiveProvider) -> Checked {
    let reference = super::named_live(name, provider);
    if provider.config.missing_key {
        return Checked::unavailable(advice::missing_key(&reference), None);
    }
    let lister = match &provider.client {
        Some(client) => client.clone(),
        None => match Client::for_model_list(provider.config.provider.clone()) {
            Ok(client) => client,
            Err(e) => {
                let detail = rojos_agent::error_chain(&e);
                return Checked::unavailable(advice::invalid_config(&reference), Some(detail));
            }
        },
    };
    match lister.list_models().await {
        Ok(list) if provider.config.model_from_list => first_listed(&reference, provider, &list),
        Ok(list) if list.offers(&reference.model) => Checked::ready(reference.model, None),
        Ok(list) => Checked::unavailable(advice::model_not_offered(&reference, list.ids()), None),
        Err(error) => failed(&reference, provider, &error),
    }
}

/// The first model `list` offers that can chat, and a client for it.
fn first_listed(reference: &ProviderRef, provider: &LiveProvider, list: &ModelList) -> Checked {
    let Some(model) = list.first_chat_model() else {
        let detail = format!("it lists: {}", list.ids().join(", "));
        return Checked::unavailable(advice::no_chat_model(reference), Some(detail));
    };
    let mut config = provider.config.provider.clone();
    config.model = model.to_owned();
    match Client::new(config) {
        Ok(client) => Checked::ready(model.to_owned(), Some(client)),
        Err(e) => Checked::unavailable(
            advice::invalid_config(reference),
            Some(rojos_agent::error_chain(&e)),
        ),
    }
}

/// What a failed list says about the provider.
fn failed(reference: &ProviderRef, provider: &LiveProvider, error: &LlmError) -> Checked {
    let detail = Some(rojos_agent::error_chain(error));
    match error {
        // The same sentence a chat would get: unreachable, by how.
        LlmError::Connect { .. } => {
            Checked::unavailable(advice::for_error(reference, error), detail)
        }
        LlmError::IdleTimeout { after, .. } => {
            Checked::unavailable(advice::no_answer(reference, *after), detail)
        }
        LlmError::Status {
            code: 401 | 403, ..
        } => Checked::unavailable(advice::for_error(reference, error), detail),
        _ if provider.config.model_from_list => {
            Checked::unavailable(advice::no_model_list(reference), detail)
        }
        _ => {
            // Reachable, and nothing says the chat will fail: its own error will tell.
            tracing::debug!(provider = %reference.name, error = detail.as_deref().unwrap_or(""), "model list not read; the provider counts as ready");
            Checked::ready(reference.model.clone(), None)
        }
    }
}
