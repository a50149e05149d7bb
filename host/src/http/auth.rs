//! Bearer tokens: the [`Caller`] extractor answers 401 for a missing or wrong token, and
//! [`Caller::authorize`] 403 for a project outside the token's scope. With no token
//! configured, the server makes one at start (printed once, never logged).

use axum::{extract::FromRequestParts, http::request::Parts};

use super::error::ApiError;
use crate::{
    config::{ProjectScope, TokenConfig},
    secret::Secret,
    state::AppState,
    storage::ProjectId,
};

/// The token table.
#[derive(Debug)]
pub struct Auth {
    tokens: Vec<TokenConfig>,
    /// The token made at start because none was configured.
    pub generated: Option<Secret>,
}

impl Auth {
    /// The configured tokens, or one fresh random token allowed on every project.
    pub fn from_config(tokens: &[TokenConfig]) -> Auth {
        if !tokens.is_empty() {
            return Auth {
                tokens: tokens.to_vec(),
                generated: None,
            };
        }
        let token = Secret::new(random_token());
        Auth {
            tokens: vec![TokenConfig {
                token: token.clone(),
                projects: ProjectScope::All,
            }],
            generated: Some(token),
        }
    }

    /// The caller presenting `header` (the `Authorization` value).
    ///
    /// # Errors
    ///
    /// [`ApiError::Unauthorized`] for a missing, malformed or unknown token.
    pub fn caller(&self, header: Option<&str>) -> Result<Caller, ApiError> {
        let presented = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ApiError::Unauthorized)?;
        self.tokens
            .iter()
            .enumerate()
            .find(|(_, t)| constant_time_eq(t.token.expose().as_bytes(), presented.as_bytes()))
            .map(|(index, t)| Caller {
                scope: t.projects.clone(),
                token: index,
            })
            .ok_or(ApiError::Unauthorized)
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    scope: ProjectScope,
    /// Which configured token it presented (its place in the table), for per-token limits.
    token: usize,
}

impl Caller {
    /// Which configured token the caller presented: its index in `[[auth.tokens]]`.
    pub fn token(&self) -> usize {
        self.token
    }

    /// Checks the caller may work on `project`.
    ///
    /// # Errors
    ///
    /// [`ApiError::Forbidden`] naming the project.
    pub fn authorize(&self, project: &ProjectId) -> Result<(), ApiError> {
        if self.scope.allows(project) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this token is not allowed on project {project}"
            )))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        state.auth.caller(header)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn auth() -> Auth {
        Auth::from_config(&[TokenConfig {
            token: Secret::new("token-demo-only"),
            projects: ProjectScope::Only(BTreeSet::from(["demo".to_owned()])),
        }])
    }

    #[test]
    fn a_missing_or_wrong_token_is_unauthorized() {
        for header in [
            None,
            Some("token-demo-only"),
            Some("Bearer nope"),
            Some("Bearer token-demo-onl"),
        ] {
            assert!(
                matches!(auth().caller(header), Err(ApiError::Unauthorized)),
                "{header:?}"
            );
        }
    }

    #[test]
    fn a_token_is_limited_to_its_projects() {
        let caller = auth().caller(Some("Bearer token-demo-only")).unwrap();
        assert!(caller.authorize(&ProjectId::parse("demo").unwrap()).is_ok());
        let e = caller
            .authorize(&ProjectId::parse("other").unwrap())
            .unwrap_err();
        assert_eq!(e.to_string(), "this token is not allowed on project other");
    }

    #[test]
    fn without_configured_tokens_one_is_generated() {
        let auth = Auth::from_config(&[]);
        let token = auth.generated.clone().unwrap();
        assert_eq!(token.expose().len(), 48);
        assert!(auth
            .caller(Some(&format!("Bearer {}", token.expose())))
            .is_ok());
    }
}
