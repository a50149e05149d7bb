//! A provider as the agent and its messages name it: [`ProviderRef`]; [`advice`] turns a
//! failure into one sentence saying what failed and what to do; [`window`] asks a provider
//! what context window its model has. The server's checks, statuses and the choice of each
//! rojo's provider, which read the live config, are the host's (`rojos::providers`).

pub mod advice;
pub mod window;

use rojos_llm::ProviderKind;

/// One configured provider, as messages to the user name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRef {
    /// Its name in `rojos.toml` (`[providers.NAME]`).
    pub name: String,
    /// Its kind, when declared with one.
    pub kind: Option<ProviderKind>,
    /// Its endpoint's `host[:port]` (never a path, query or key).
    pub host: String,
    /// The model it is asked for (empty while it is to be taken from the server's list).
    pub model: String,
    /// The environment variable its API key comes from, if any.
    pub key_env: Option<String>,
}

impl ProviderRef {
    /// What to call it in a sentence: the kind's label ("LM Studio"), or the provider's name.
    pub fn label(&self) -> &str {
        match self.kind {
            Some(kind) => kind.label(),
            None => &self.name,
        }
    }
}
