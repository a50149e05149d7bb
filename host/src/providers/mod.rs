//! The providers as the user knows them: [`ProviderRef`] names one (its name in
//! `rojos.toml`, its kind, host and model), and [`advice`] turns a failure into one sentence
//! saying what failed and what to do. [`check`] checks one provider cheaply (its model list),
//! [`status`] keeps what the checks found, [`monitor`] runs them in the background, and
//! [`choice`] picks the provider each rojo uses now; [`window`] asks a provider what
//! context window its model has.

pub mod advice;
pub mod check;
pub mod choice;
pub mod monitor;
pub mod status;
pub mod window;

use rojos_llm::ProviderKind;

use crate::{
    config::ProviderConfig,
    live::{endpoint_host, LiveProvider},
};

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
    /// The provider `name` configured as `config`.
    pub fn new(name: &str, config: &ProviderConfig) -> ProviderRef {
        ProviderRef::with_host(name, config, endpoint_host(&config.provider.base_url))
    }

    /// The live provider `name`, with the endpoint host found when it was loaded.
    pub fn of_live(name: &str, provider: &LiveProvider) -> ProviderRef {
        ProviderRef::with_host(name, &provider.config, provider.host().to_owned())
    }

    fn with_host(name: &str, config: &ProviderConfig, host: String) -> ProviderRef {
        ProviderRef {
            name: name.to_owned(),
            kind: config.kind,
            host,
            model: config.provider.model.clone(),
            key_env: config.key_env.clone(),
        }
    }

    /// What to call it in a sentence: the kind's label ("LM Studio"), or the provider's name.
    pub fn label(&self) -> &str {
        match self.kind {
            Some(kind) => kind.label(),
            None => &self.name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_provider_is_named_as_its_configuration_is() {
        let config = ProviderConfig {
            provider: rojos_llm::Provider::new("https://user:key@api.example:8443/v1?k=s", "m"),
            kind: None,
            key_env: Some("EXAMPLE_KEY".into()),
            missing_key: false,
            model_from_list: false,
            context_tokens: None,
        };
        let live = LiveProvider::new(config.clone(), None);
        let named = ProviderRef::of_live("p", &live);
        assert_eq!(named, ProviderRef::new("p", &config));
        assert_eq!(named.host, "api.example:8443");
    }
}
