//! `[rojos.NAME]`: an assistant's providers, prompt, tools, step limit, approvals and
//! context window.

use std::{
    collections::{BTreeMap, BTreeSet},
    num::NonZeroU32,
    sync::Arc,
};

use rojos_agent::rojo::{RojoConfig, ToolSelection};

use super::{
    approve,
    keys::{invalid, ConfigError, EnvLookup},
    provider::{self, ProviderConfig},
    raw::{RawNames, RawProvider, RawRojo},
};

pub(super) fn parse_providers(
    raw: &BTreeMap<String, RawProvider>,
    env: EnvLookup<'_>,
    max_model_turn_bytes: usize,
) -> Result<BTreeMap<String, ProviderConfig>, ConfigError> {
    raw.iter()
        .map(|(name, p)| {
            Ok((
                name.clone(),
                provider::parse(name, p, env, max_model_turn_bytes)?,
            ))
        })
        .collect()
}

pub(super) fn parse_rojos(
    raw: &BTreeMap<String, RawRojo>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<BTreeMap<String, RojoConfig>, ConfigError> {
    raw.iter()
        .map(|(name, r)| Ok((name.clone(), parse_rojo(name, r, providers)?)))
        .collect()
}

fn parse_rojo(
    name: &str,
    raw: &RawRojo,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<RojoConfig, ConfigError> {
    let key = format!("rojos.{name}");
    let candidates = match &raw.provider {
        RawNames::One(name) => vec![name.clone()],
        RawNames::List(list) => list.clone(),
    };
    if candidates.is_empty() {
        return Err(invalid(
            format!("{key}.provider"),
            "name at least one provider",
        ));
    }
    if let Some(unknown) = candidates.iter().find(|c| !providers.contains_key(*c)) {
        let known: Vec<&str> = providers.keys().map(String::as_str).collect();
        return Err(invalid(
            format!("{key}.provider"),
            format!(
                "no provider named {unknown:?} (the file declares: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    let tools = match &raw.tools {
        RawNames::One(s) if s == "*" => ToolSelection::All,
        RawNames::One(s) => ToolSelection::Only(BTreeSet::from([s.clone()])),
        RawNames::List(list) if list.iter().any(|t| t == "*") => ToolSelection::All,
        RawNames::List(list) => ToolSelection::Only(list.iter().cloned().collect()),
    };
    let Some(max_steps) = NonZeroU32::new(raw.max_steps.unwrap_or(12)) else {
        return Err(invalid(format!("{key}.max_steps"), "must be at least 1"));
    };
    Ok(RojoConfig {
        providers: candidates,
        system_prompt: raw.system_prompt.as_deref().map(Arc::from),
        tools,
        max_steps,
        approve: approve::parse(name, raw.approve.as_ref())?,
        context_tokens: provider::context_tokens(&key, raw.context_tokens)?,
        compact_at_percent: match raw.compact_at_percent {
            Some(p) if p > 100 => {
                return Err(invalid(
                    format!("{key}.compact_at_percent"),
                    "must be 0 (never compact) to 100",
                ))
            }
            p => p.unwrap_or(rojos_agent::context::DEFAULT_COMPACT_AT_PERCENT),
        },
    })
}
