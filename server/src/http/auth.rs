//! Bearer tokens: the [`Caller`] extractor answers 401 for a missing or wrong token, and
//! [`Caller::authorize`] 403 for a project outside the token's scope. With no token
//! configured, the server makes one at start (printed once, never logged).
//!
//! Tokens are compared as SHA-256 digests, in constant time, against every configured token:
//! how long a check takes says nothing about how much of a token matched, nor how long the
//! configured tokens are, nor which of them matched.

use std::sync::Arc;

use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};
use rojos_config::{ProjectScope, TokenConfig};
use rojos_llm::Secret;
use rojos_project_storage::ProjectId;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::error::ApiError;
use crate::hex::hex;

/// The token table.
#[derive(Debug)]
pub struct Auth {
    tokens: Vec<KnownToken>,
    /// The token made at start because none was configured.
    pub generated: Option<Secret>,
}

/// A configured token as the check needs it: its digest, hashed once at start.
struct KnownToken {
    digest: [u8; 32],
    projects: ProjectScope,
}

impl std::fmt::Debug for KnownToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A digest of a token is as good as the token for a guessing attacker: never shown.
        f.debug_struct("KnownToken")
            .field("projects", &self.projects)
            .finish_non_exhaustive()
    }
}

impl KnownToken {
    fn new(config: &TokenConfig) -> KnownToken {
        KnownToken {
            digest: digest(config.token.expose()),
            projects: config.projects.clone(),
        }
    }
}

impl Auth {
    /// The configured tokens, or one fresh random token allowed on every project.
    pub fn from_config(tokens: &[TokenConfig]) -> Auth {
        if !tokens.is_empty() {
            return Auth {
                tokens: tokens.iter().map(KnownToken::new).collect(),
                generated: None,
            };
        }
        let token = Secret::new(random_token());
        Auth {
            tokens: vec![KnownToken::new(&TokenConfig {
                token: token.clone(),
                projects: ProjectScope::All,
            })],
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
        let index = self
            .matching_token(&digest(presented))
            .ok_or(ApiError::Unauthorized)?;
        let known = self.tokens.get(index).ok_or(ApiError::Unauthorized)?;
        Ok(Caller {
            scope: known.projects.clone(),
            token: index,
        })
    }

    /// The index of the configured token whose digest is `presented`. Every configured
    /// token is compared, all 32 bytes each (`subtle`, no early return on the first
    /// differing byte nor on the first match), and the index is picked without a branch;
    /// digests have one length, so neither is the tokens' length revealed.
    fn matching_token(&self, presented: &[u8; 32]) -> Option<usize> {
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, known) in self.tokens.iter().enumerate() {
            let equal = known.digest.ct_eq(presented);
            index = u64::conditional_select(&index, &(i as u64), equal);
            found |= equal;
        }
        bool::from(found).then_some(index as usize)
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

/// The caller of a request to a server whose state holds the token table.
impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Arc<Auth>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Arc::<Auth>::from_ref(state).caller(header)
    }
}

/// The SHA-256 digest of a token: a fixed size whatever the token's length.
fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    hex(&bytes)
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

    fn two_tokens() -> Auth {
        Auth::from_config(&[
            TokenConfig {
                token: Secret::new("first-token-0001"),
                projects: ProjectScope::Only(BTreeSet::from(["one".to_owned()])),
            },
            TokenConfig {
                token: Secret::new("a-much-longer-second-token-0002"),
                projects: ProjectScope::All,
            },
        ])
    }

    #[test]
    fn each_configured_token_is_found_whatever_its_place_and_length() {
        let auth = two_tokens();
        let first = auth.caller(Some("Bearer first-token-0001")).unwrap();
        assert_eq!(first.token(), 0);
        assert!(first.authorize(&ProjectId::parse("one").unwrap()).is_ok());
        assert!(first.authorize(&ProjectId::parse("two").unwrap()).is_err());
        let second = auth
            .caller(Some("Bearer a-much-longer-second-token-0002"))
            .unwrap();
        assert_eq!(second.token(), 1);
        assert!(second.authorize(&ProjectId::parse("two").unwrap()).is_ok());
    }

    #[test]
    fn prefixes_extensions_and_empty_tokens_are_refused() {
        let auth = two_tokens();
        for presented in [
            "",
            "first-token-000",
            "first-token-00011",
            "first-token-0002",
            "a-much-longer-second-token-0001",
            "FIRST-TOKEN-0001",
        ] {
            assert!(
                matches!(
                    auth.caller(Some(&format!("Bearer {presented}"))),
                    Err(ApiError::Unauthorized)
                ),
                "{presented:?}"
            );
        }
    }

    #[test]
    fn the_token_table_never_shows_tokens_or_their_digests() {
        let auth = two_tokens();
        let shown = format!("{auth:?}");
        let digest_hex = hex(&digest("first-token-0001"));
        assert!(!shown.contains("first-token-0001"), "{shown}");
        assert!(!shown.contains(&digest_hex[..8]), "{shown}");
        assert!(!shown.contains("digest"), "{shown}");
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
