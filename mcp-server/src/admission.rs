//! Admission of MCP `tools/call`s under the caller's limits (`docs/mcp.md`, "Limits"): the
//! transport that knows the caller (the HTTP route knows the bearer token) attaches a
//! [`CallAdmission`] to each request, and the handler asks it for a place before each call.
//! What the limits are is the transport's business; a refusal comes back as an error result.

use std::{fmt, sync::Arc};

/// Decides whether one more tool call may start now.
pub trait CallAdmission: Send + Sync + fmt::Debug {
    /// A place for one call, held until the [`AdmittedCall`] is dropped.
    ///
    /// # Errors
    ///
    /// [`CallRefused`] when a limit is reached, with the text the client is shown.
    fn admit(&self) -> Result<AdmittedCall, CallRefused>;
}

/// The place one admitted call holds while it runs.
pub struct AdmittedCall {
    _place: Box<dyn Send + Sync>,
}

impl AdmittedCall {
    /// A place that lasts as long as `place` (e.g. semaphore permits).
    pub fn holding(place: impl Send + Sync + 'static) -> AdmittedCall {
        AdmittedCall {
            _place: Box::new(place),
        }
    }
}

impl fmt::Debug for AdmittedCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdmittedCall")
    }
}

/// Why a call was refused: which limit, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallRefused(pub String);

/// The [`CallAdmission`] of one request, carried in its HTTP extensions.
#[derive(Debug, Clone)]
pub struct McpAdmission(pub Arc<dyn CallAdmission>);
