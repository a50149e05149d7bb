//! One `[providers.NAME]` table → [`ProviderConfig`]. A `kind` fills in the base URL, the
//! API key's environment variable, a model and the service's quirks; every key given in the
//! table overrides what the kind fills in. A key that is not set in the environment does not
//! stop the server: the provider is unavailable until it is (see docs/configuration.md,
//! "Providers").

use std::time::Duration;

use rojos_llm::ProviderKind;

use super::{
    keys::{invalid, seconds_key, ConfigError, EnvLookup},
    raw::RawEmptyContent,
    raw::RawProvider,
};

/// `[providers.NAME]`: everything the provider client needs, and what the server must know to
/// tell whether it is available.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The client settings (URL, model, key, time-outs, retries). `model` is empty when
    /// [`ProviderConfig::model_from_list`] is set.
    pub provider: rojos_llm::Provider,
    /// The kind it was declared as (`kind = "ollama"`), if any.
    pub kind: Option<ProviderKind>,
    /// The environment variable its API key comes from (`api_key_env`, or the kind's), if any.
    pub key_env: Option<String>,
    /// That variable is not set (or empty): the provider cannot be used until it is.
    pub missing_key: bool,
    /// No `model` was given and the kind has none to start with (a local server): the first
    /// model the server lists is used.
    pub model_from_list: bool,
    /// The model's context window in tokens, as `context_tokens` gives it.
    pub context_tokens: Option<u64>,
}

/// Reads `[providers.NAME]`; `max_model_turn_bytes` is `[limits]`'s, applied to the client (a
/// bigger turn fails; one call's arguments never exceed it either).
pub(super) fn parse(
    name: &str,
    raw: &RawProvider,
    env: EnvLookup<'_>,
    max_model_turn_bytes: usize,
) -> Result<ProviderConfig, ConfigError> {
    let key = format!("providers.{name}");
    let kind = parse_kind(&key, raw.kind.as_deref())?;
    let base_url = base_url(&key, raw.base_url.as_deref(), kind)?;
    let (model, model_from_list) = model(&key, raw.model.as_deref(), kind)?;
    let mut client = rojos_llm::Provider::new(base_url, model);
    if let Some(kind) = kind {
        kind.apply_quirks(&mut client);
    }
    client.limits.max_turn_bytes = max_model_turn_bytes;
    client.limits.max_argument_bytes = client.limits.max_argument_bytes.min(max_model_turn_bytes);
    let key_var = raw
        .api_key_env
        .clone()
        .or_else(|| kind.and_then(ProviderKind::api_key_env).map(str::to_owned));
    let mut missing_key = false;
    if let Some(var) = &key_var {
        match env(var).filter(|value| !value.trim().is_empty()) {
            Some(api_key) => client = client.with_api_key(api_key),
            None => missing_key = true,
        }
    }
    set_timeouts(&key, raw, &mut client)?;
    match raw.max_attempts {
        Some(0) => return Err(invalid(format!("{key}.max_attempts"), "must be at least 1")),
        Some(n) => client.retry.max_attempts = n,
        None => {}
    }
    if let Some(empty) = raw.empty_content {
        client.empty_content = match empty {
            RawEmptyContent::Null => rojos_llm::EmptyContent::Null,
            RawEmptyContent::EmptyString => rojos_llm::EmptyContent::EmptyString,
        };
    }
    Ok(ProviderConfig {
        provider: client,
        kind,
        key_env: key_var,
        missing_key,
        model_from_list,
        context_tokens: context_tokens(&key, raw.context_tokens)?,
    })
}

/// `context_tokens` (a provider's or a rojo's `key`): a window too small for any request is
/// refused.
pub(super) fn context_tokens(key: &str, given: Option<u64>) -> Result<Option<u64>, ConfigError> {
    match given {
        Some(n) if n < rojos_agent::context::MIN_CONTEXT_TOKENS => Err(invalid(
            format!("{key}.context_tokens"),
            format!(
                "must be at least {} (the model's context window, in tokens)",
                rojos_agent::context::MIN_CONTEXT_TOKENS
            ),
        )),
        given => Ok(given),
    }
}

fn parse_kind(key: &str, name: Option<&str>) -> Result<Option<ProviderKind>, ConfigError> {
    let Some(name) = name else {
        return Ok(None);
    };
    ProviderKind::from_name(name).map(Some).ok_or_else(|| {
        let known: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.name()).collect();
        invalid(
            format!("{key}.kind"),
            format!("unknown kind {name:?} (known: {})", known.join(", ")),
        )
    })
}

fn base_url(
    key: &str,
    given: Option<&str>,
    kind: Option<ProviderKind>,
) -> Result<String, ConfigError> {
    let Some(url) = given.or_else(|| kind.map(ProviderKind::base_url)) else {
        return Err(invalid(
            format!("{key}.base_url"),
            "missing: give the endpoint's URL, or a `kind` (e.g. kind = \"ollama\")",
        ));
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(
            format!("{key}.base_url"),
            format!(
                "must start with http:// or https://, got {:?}",
                rojos_llm::display_url(url)
            ),
        ));
    }
    rojos_llm::chat_completions_url(url)
        .map_err(|e| invalid(format!("{key}.base_url"), e.to_string()))?;
    Ok(url.to_owned())
}

/// The model, and whether it is to be taken from the server's list.
fn model(
    key: &str,
    given: Option<&str>,
    kind: Option<ProviderKind>,
) -> Result<(String, bool), ConfigError> {
    match (given, kind) {
        (Some(model), _) if model.trim().is_empty() => {
            Err(invalid(format!("{key}.model"), "must not be empty"))
        }
        (Some(model), _) => Ok((model.to_owned(), false)),
        (None, Some(kind)) => match kind.default_model() {
            Some(model) => Ok((model.to_owned(), false)),
            None => Ok((String::new(), true)),
        },
        (None, None) => Err(invalid(
            format!("{key}.model"),
            "missing: name the model to use",
        )),
    }
}

fn set_timeouts(
    key: &str,
    raw: &RawProvider,
    client: &mut rojos_llm::Provider,
) -> Result<(), ConfigError> {
    let seconds = |name: &str, value: Option<f64>, default: Duration| {
        seconds_key(&format!("{key}.{name}"), value, default, 86_400.0)
    };
    let defaults = client.timeouts;
    client.timeouts.connect = seconds(
        "connect_timeout_secs",
        raw.connect_timeout_secs,
        defaults.connect,
    )?;
    client.timeouts.idle = seconds("idle_timeout_secs", raw.idle_timeout_secs, defaults.idle)?;
    client.timeouts.turn = seconds("turn_timeout_secs", raw.turn_timeout_secs, defaults.turn)?;
    Ok(())
}
