//! The providers as the user knows them. [`ProviderRef`] names one (its name in `rojos.toml`,
//! its kind, host and model; [`named`] makes it from the config), [`advice`] turns a failure
//! into one sentence saying what failed and what to do, and [`window`] asks a provider what
//! context window its model has: these three are the agent's (`rojos-agent`), re-exported.
//! [`check`] checks one provider cheaply (its model list), [`status`] keeps what the checks
//! found, [`monitor`] runs them in the background, and [`choice`] picks the provider each
//! rojo uses now.

pub mod check;
pub mod choice;
pub mod monitor;
pub mod status;

pub use rojos_agent::providers::{advice, window, ProviderRef};
use rojos_config::ProviderConfig;

use crate::live::{endpoint_host, LiveProvider};

/// The provider `name` configured as `config`.
pub fn named(name: &str, config: &ProviderConfig) -> ProviderRef {
    with_host(name, config, endpoint_host(&config.provider.base_url))
}

/// The live provider `name`, with the endpoint host found when it was loaded.
pub fn named_live(name: &str, provider: &LiveProvider) -> ProviderRef {
    with_host(name, &provider.config, provider.host().to_owned())
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
        let from_live = named_live("p", &live);
        assert_eq!(from_live, named("p", &config));
        assert_eq!(from_live.host, "api.example:8443");
    }
}
