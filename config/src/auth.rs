//! `[auth]`: the bearer tokens, the projects each may touch, and the rate limit.

use std::collections::BTreeSet;

use rojos_llm::Secret;
use rojos_project_storage::ProjectId;

use super::{
    keys::{invalid, ConfigError, EnvLookup},
    raw::RawToken,
};

/// One bearer token and the projects it may touch.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    /// The token value.
    pub token: Secret,
    /// The projects it is allowed on.
    pub projects: ProjectScope,
}

/// The projects a token is allowed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectScope {
    /// `["*"]`: every project.
    All,
    /// Only these project ids.
    Only(BTreeSet<String>),
}

impl ProjectScope {
    /// Whether `project` is in scope.
    pub fn allows(&self, project: &ProjectId) -> bool {
        match self {
            ProjectScope::All => true,
            ProjectScope::Only(set) => set.contains(project.as_str()),
        }
    }
}

pub(super) fn parse_tokens(
    raw: &[RawToken],
    env: EnvLookup<'_>,
) -> Result<Vec<TokenConfig>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, t)| parse_token(i, t, env))
        .collect()
}

pub(super) fn parse_rate_limit(per_minute: Option<u32>) -> Result<Option<u32>, ConfigError> {
    if per_minute == Some(0) {
        return Err(invalid(
            "auth.rate_limit_per_minute",
            "must be at least 1 (leave it out for no rate limit)",
        ));
    }
    Ok(per_minute)
}

fn parse_token(i: usize, raw: &RawToken, env: EnvLookup<'_>) -> Result<TokenConfig, ConfigError> {
    let key = format!("auth.tokens[{i}]");
    let token = match (&raw.token, &raw.token_env) {
        (Some(t), None) => t.clone(),
        (None, Some(var)) => env(var).ok_or_else(|| {
            invalid(
                format!("{key}.token_env"),
                format!("environment variable {var} is not set"),
            )
        })?,
        _ => return Err(invalid(&key, "give exactly one of `token` and `token_env`")),
    };
    if token.len() < 8 {
        return Err(invalid(&key, "a token must be at least 8 characters"));
    }
    let projects = if raw.projects.iter().any(|p| p == "*") {
        ProjectScope::All
    } else {
        for p in &raw.projects {
            ProjectId::parse(p).map_err(|e| invalid(format!("{key}.projects"), e.to_string()))?;
        }
        ProjectScope::Only(raw.projects.iter().cloned().collect())
    };
    Ok(TokenConfig {
        token: Secret::new(token),
        projects,
    })
}
