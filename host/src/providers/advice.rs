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

// What the background check of a provider found (`providers/check.rs`), one sentence each.

/// The end every sentence shares: the other way out.
const OR_ANOTHER: &str = "or set another provider in rojos.toml";

/// `provider` cannot be reached: for a local server, it is not running (with how to start
/// it); for a hosted one, the network or its `base_url`.
pub fn unreachable(provider: &ProviderRef) -> String {
    match provider.kind {
        Some(kind) if kind.is_local() => format!(
            "{} is not running at {}: {}, {OR_ANOTHER}",
            kind.label(),
            provider.host,
            kind.setup_hint()
        ),
        _ => format!(
            "{} cannot be reached at {}: check that it is up and the network (or its base_url), {OR_ANOTHER}",
            provider.label(),
            provider.host
        ),
    }
}

/// `provider` accepted the connection but did not list its models within `after`.
pub fn no_answer(provider: &ProviderRef, after: std::time::Duration) -> String {
    format!(
        "{} at {} did not answer within {}s: check that it is running properly, {OR_ANOTHER}",
        provider.label(),
        provider.host,
        after.as_secs()
    )
}

/// `provider` refused its API key (HTTP 401 or 403), or asks for one it was not given.
pub fn key_refused(provider: &ProviderRef) -> String {
    let Some(var) = provider.key_env.as_deref() else {
        return format!(
            "{} at {} asks for an API key: set `api_key_env` for providers.{} in rojos.toml, {OR_ANOTHER}",
            provider.label(),
            provider.host,
            provider.name
        );
    };
    let hint = provider
        .kind
        .map(|kind| format!(" ({})", kind.setup_hint()))
        .unwrap_or_default();
    format!(
        "{} refused the API key in {var}: set a valid key{hint} and restart the server, {OR_ANOTHER}",
        provider.label()
    )
}

/// `provider` does not offer its model; `offered` is what it listed.
pub fn model_not_offered(provider: &ProviderRef, offered: &[String]) -> String {
    let (label, model) = (provider.label(), &provider.model);
    match provider.kind {
        Some(rojos_llm::ProviderKind::Ollama) => format!(
            "Ollama at {} does not have model {model}: pull it with `ollama pull {model}`, or set `model` to one it has{}",
            provider.host,
            some_of(offered)
        ),
        Some(rojos_llm::ProviderKind::LmStudio) => format!(
            "LM Studio at {} does not have model {model}: download it (`lms get {model}`), or set `model` to one it has{}",
            provider.host,
            some_of(offered)
        ),
        _ => format!(
            "{label} does not offer model {model}: set `model` in rojos.toml to one it offers{}",
            some_of(offered)
        ),
    }
}

/// `provider` is to use the first model it lists, and lists none that can chat.
pub fn no_chat_model(provider: &ProviderRef) -> String {
    let how = match provider.kind {
        Some(kind) => kind.setup_hint(),
        None => "make a chat model available there",
    };
    format!(
        "{} at {} has no chat model: {how}, or set `model` in rojos.toml",
        provider.label(),
        provider.host
    )
}

/// `provider` is to use the first model it lists, and its list could not be read.
pub fn no_model_list(provider: &ProviderRef) -> String {
    format!(
        "{} at {} did not list its models: set `model` for it in rojos.toml, {OR_ANOTHER}",
        provider.label(),
        provider.host
    )
}

/// `provider`'s client cannot be built from its configuration.
pub fn invalid_config(provider: &ProviderRef) -> String {
    format!(
        "{} is not configured correctly (see the server log): fix providers.{} in rojos.toml",
        provider.label(),
        provider.name
    )
}

/// No provider of rojo `rojo` has been checked yet.
pub fn still_checking(rojo: &str) -> String {
    format!("rojo {rojo}'s providers are still being checked: try again in a few seconds")
}

/// " (it offers: a, b, c, …)" for the first few of `offered`, or nothing.
fn some_of(offered: &[String]) -> String {
    const SHOWN: usize = 5;
    if offered.is_empty() {
        return String::new();
    }
    let mut list = offered
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if offered.len() > SHOWN {
        list.push_str(", …");
    }
    format!(" (it offers: {list})")
}

#[cfg(test)]
mod check_tests {
    use super::*;
    use rojos_llm::ProviderKind;

    fn reference(kind: Option<ProviderKind>, host: &str, model: &str) -> ProviderRef {
        ProviderRef {
            name: kind.map_or("custom", |k| k.name()).to_owned(),
            kind,
            host: host.to_owned(),
            model: model.to_owned(),
            key_env: kind.and_then(ProviderKind::api_key_env).map(str::to_owned),
        }
    }

    #[test]
    fn an_unreachable_ollama_says_how_to_start_it() {
        let ollama = reference(Some(ProviderKind::Ollama), "127.0.0.1:11434", "");
        assert_eq!(
            unreachable(&ollama),
            "Ollama is not running at 127.0.0.1:11434: start it with `ollama serve` and pull a \
             model with tool support (`ollama pull qwen2.5:7b`), or set another provider in \
             rojos.toml"
        );
    }

    #[test]
    fn a_refused_key_names_its_variable_and_where_to_get_one() {
        let openai = reference(Some(ProviderKind::OpenAi), "api.openai.com", "gpt-4.1-mini");
        assert_eq!(
            key_refused(&openai),
            "OpenAI refused the API key in OPENAI_API_KEY: set a valid key (get a key at \
             https://platform.openai.com/api-keys) and restart the server, or set another \
             provider in rojos.toml"
        );
    }

    #[test]
    fn a_missing_model_says_how_to_get_it_and_lists_some_offered() {
        let ollama = reference(Some(ProviderKind::Ollama), "127.0.0.1:11434", "qwen3:8b");
        let offered: Vec<String> = (1..=7).map(|n| format!("m{n}")).collect();
        assert_eq!(
            model_not_offered(&ollama, &offered),
            "Ollama at 127.0.0.1:11434 does not have model qwen3:8b: pull it with `ollama pull \
             qwen3:8b`, or set `model` to one it has (it offers: m1, m2, m3, m4, m5, …)"
        );
        let custom = reference(None, "h:1", "x");
        assert_eq!(
            model_not_offered(&custom, &[]),
            "custom does not offer model x: set `model` in rojos.toml to one it offers"
        );
    }
}
