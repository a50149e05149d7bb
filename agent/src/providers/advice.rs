//! One sentence for the user when a provider cannot be used or fails: what failed and what to
//! do ("Ollama is not running at 127.0.0.1:11434: start it with `ollama serve`, or set another
//! provider in rojos.toml"). The technical detail goes to the log, not into these sentences.

use rojos_llm::{Fault, LlmError, ProviderKind, Reach};

use super::ProviderRef;

/// What to tell the user when a model turn with `provider` failed with `error`: what failed,
/// naming the provider as configured, and what to do, by the error's [`Fault`] (see
/// docs/api.md, "ERROR").
pub fn for_error(provider: &ProviderRef, error: &LlmError) -> String {
    let who = provider.label();
    let host = &provider.host;
    let table = table(provider);
    match error.fault() {
        Fault::Unreachable(reach) => unreachable(provider, reach),
        Fault::KeyRefused => key_refused(provider),
        Fault::Forbidden => format!(
            "{who} refused the request{} ({}): check what the key may be used for, or set \
             another provider in rojos.toml",
            in_key(provider),
            said(error)
        ),
        Fault::UnknownModel => unknown_model(provider),
        Fault::NoToolSupport => no_tool_support(provider, error),
        Fault::NoEndpoint => format!(
            "{who} at {host} has no Chat Completions API at the configured address ({}): \
             check `base_url` and `model` in {table}",
            said(error)
        ),
        Fault::RateLimited => {
            format!("{who} is rate limiting requests: wait a minute and send the message again")
        }
        Fault::OutOfCredit => format!(
            "{who} says the account is out of quota or credit: add credit in its billing \
             settings, or set another provider in rojos.toml"
        ),
        Fault::ContextTooLong => format!(
            "The conversation is too long for {}'s context: start a new conversation",
            model(provider)
        ),
        Fault::OutOfTokens => format!(
            "{} reached its token limit before writing an answer, most likely because the \
             conversation fills its context: start a new conversation",
            model(provider)
        ),
        Fault::ProviderDown => format!(
            "{who} failed on its side ({}): wait a moment and send the message again, or set \
             another provider in rojos.toml",
            said(error)
        ),
        Fault::StreamCut => {
            format!("The answer from {who} broke off before its end: send the message again")
        }
        Fault::IdleTimeout => timed_out(provider, error),
        Fault::TurnTimeout => timed_out(provider, error),
        Fault::NotCompatible => format!(
            "{who} at {host} did not answer like an OpenAI-compatible Chat Completions API: \
             check `base_url` in {table} (it usually ends in /v1)"
        ),
        Fault::EmptyTurn => format!(
            "{who} ended the turn without an answer ({}): send the message again, or set \
             another `model` in {table}",
            received(error)
        ),
        // Its message already says which limit and what to do.
        Fault::TooLarge => error.to_string(),
        _ => own_message(provider, error),
    }
}

/// `[providers.NAME]`, where the user fixes it.
fn table(provider: &ProviderRef) -> String {
    format!("[providers.{}]", provider.name)
}

/// The model by name, or "LABEL's model" while it is to be taken from the server's list.
fn model(provider: &ProviderRef) -> String {
    if provider.model.is_empty() {
        format!("{}'s model", provider.label())
    } else {
        provider.model.clone()
    }
}

/// " with the key in VAR", when the provider has a key variable.
fn in_key(provider: &ProviderRef) -> String {
    provider
        .key_env
        .as_deref()
        .map(|var| format!(" with the key in {var}"))
        .unwrap_or_default()
}

/// Whether the provider runs on this machine: a local kind, or a loopback address.
fn is_local(provider: &ProviderRef) -> bool {
    provider.kind.map_or_else(
        || {
            let host = provider.host.as_str();
            host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
        },
        ProviderKind::is_local,
    )
}

fn unreachable(provider: &ProviderRef, reach: Reach) -> String {
    let who = provider.label();
    let host = &provider.host;
    let table = table(provider);
    match reach {
        Reach::Refused if is_local(provider) => match provider.kind {
            Some(kind) => format!(
                "{who} is not running at {host}: {}, or set another provider in rojos.toml",
                kind.setup_hint()
            ),
            None => {
                format!("{who} is not running at {host}: start it, or check `base_url` in {table}")
            }
        },
        Reach::NameNotResolved => {
            let name = host.split(':').next().unwrap_or(host);
            format!(
                "{who} cannot be reached: the name {name} does not resolve; check the network \
                 connection and `base_url` in {table}"
            )
        }
        Reach::Tls => format!(
            "{who} at {host} failed the secure (TLS) connection: check that `base_url` in \
             {table} starts with the right http:// or https://"
        ),
        Reach::TimedOut => format!(
            "{who} did not accept a connection at {host} in time: check the network \
             connection, or set another provider in rojos.toml"
        ),
        _ => format!(
            "{who} cannot be reached at {host}: check the network connection and `base_url` \
             in {table}, or set another provider in rojos.toml"
        ),
    }
}

fn key_refused(provider: &ProviderRef) -> String {
    let who = provider.label();
    match &provider.key_env {
        Some(var) => format!(
            "{who} refused the API key in {var}: check the key, or set another provider in \
             rojos.toml"
        ),
        None => format!(
            "{who} refused the request as unauthenticated: set `api_key_env` in {} to the \
             variable holding its API key",
            table(provider)
        ),
    }
}

fn unknown_model(provider: &ProviderRef) -> String {
    let who = provider.label();
    let table = table(provider);
    let model = &provider.model;
    if model.is_empty() {
        return format!(
            "{who} does not have the model asked for: set `model` in {table} to one it offers"
        );
    }
    if provider.kind == Some(ProviderKind::Ollama) {
        return format!(
            "{who} has no model {model}: pull it with `ollama pull {model}`, or set `model` in \
             {table} to one it has"
        );
    }
    format!("{who} has no model {model}: set `model` in {table} to one it offers")
}

/// The model cannot call tools, or the server was started without tool calling (vLLM's
/// `--enable-auto-tool-choice`, llama.cpp's `--jinja`): then how to start it.
fn no_tool_support(provider: &ProviderRef, error: &LlmError) -> String {
    let who = provider.label();
    let server_flag = error
        .provider_message()
        .is_some_and(|m| m.contains("--enable-auto-tool-choice") || m.contains("--jinja"));
    match provider.kind {
        Some(kind) if server_flag => format!(
            "{who} at {} was started without tool calling: {}",
            provider.host,
            kind.setup_hint()
        ),
        _ if server_flag => format!(
            "{who} at {} was started without tool calling: restart it with tool calling on",
            provider.host
        ),
        _ => format!(
            "{} cannot call tools on {who}: set `model` in {} to one with tool support",
            model(provider),
            table(provider)
        ),
    }
}

fn timed_out(provider: &ProviderRef, error: &LlmError) -> String {
    let who = provider.label();
    let table = table(provider);
    match error {
        LlmError::TurnTimeout { after, .. } => format!(
            "The answer from {who} took longer than {}s: ask for less in one message, or \
             raise `turn_timeout_secs` in {table}",
            after.as_secs_f64()
        ),
        LlmError::IdleTimeout { after, .. } => format!(
            "{who} sent nothing for {}s: send the message again, or raise \
             `idle_timeout_secs` in {table}",
            after.as_secs_f64()
        ),
        other => own_message(provider, other),
    }
}

/// What an empty turn received ("3 chunks with no choices, then [DONE]").
fn received(error: &LlmError) -> &str {
    match error {
        LlmError::EmptyTurn { received, .. } => received,
        _ => "nothing usable",
    }
}

/// The provider's own words, for a failure no [`Fault`] names.
fn own_message(provider: &ProviderRef, error: &LlmError) -> String {
    let who = provider.label();
    match error {
        LlmError::Status { .. } => format!(
            "{who} refused the request ({}): if it happens again, set another model or \
             provider in rojos.toml",
            said(error)
        ),
        LlmError::Provider { .. } => format!(
            "{who} reported an error ({}): send the message again, or set another provider in \
             rojos.toml",
            said(error)
        ),
        other => format!(
            "The request to {who} could not be made ({other}): check {} in rojos.toml",
            table(provider)
        ),
    }
}

/// The status and the provider's message as the user may read them: `HTTP 503: "Overloaded"`,
/// or only the status when the message is a page of HTML or empty.
fn said(error: &LlmError) -> String {
    let message = error.provider_message().and_then(readable);
    match (error.status_code(), message) {
        (Some(code), Some(message)) => format!("HTTP {code}: \"{message}\""),
        (Some(code), None) => format!("HTTP {code}"),
        (None, Some(message)) => format!("\"{message}\""),
        (None, None) => "no message".to_owned(),
    }
}

/// At most 200 bytes of a provider's message, without its closing period; `None` for an
/// HTML page or nothing.
fn readable(message: &str) -> Option<String> {
    const MAX: usize = 200;
    let text = message.trim().trim_end_matches('.');
    if text.is_empty() || text.starts_with('<') {
        return None;
    }
    if text.len() <= MAX {
        return Some(text.to_owned());
    }
    let mut cut = MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(format!("{}…", &text[..cut]))
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

// What the background check of a provider found (`providers/check.rs`) beyond what a failed
// request says (that is `for_error`'s): one sentence each.

/// The end every sentence shares: the other way out.
const OR_ANOTHER: &str = "or set another provider in rojos.toml";

/// `provider` accepted the connection but did not list its models within `after`.
pub fn no_answer(provider: &ProviderRef, after: std::time::Duration) -> String {
    format!(
        "{} at {} did not answer within {}s: check that it is running properly, {OR_ANOTHER}",
        provider.label(),
        provider.host,
        after.as_secs()
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
mod tests;

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
