//! `ApiError`: a failure before a response starts, mapped to the status codes of docs/api.md with
//! a `{"error": "..."}` body written for the user. Internal detail goes to the log only.

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

/// A request refused or failed before streaming began.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or names something unknown.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no token, or a wrong one.
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// 403: the token is not allowed on that project.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such resource.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists, the method does not; `allow` lists the methods it has.
    #[error("{message}")]
    MethodNotAllowed {
        /// What was refused and what to use instead.
        message: String,
        /// The `Allow` header.
        allow: &'static str,
    },
    /// 409: the target is busy (a run is in progress in the conversation); retrying later
    /// can succeed.
    #[error("{0}")]
    Conflict(String),
    /// 410: what the request names existed but is gone for good (an undo checkpoint dropped
    /// to keep within its budget).
    #[error("{0}")]
    Gone(String),
    /// 413: the body is too large.
    #[error("request body too large (limit {0} bytes)")]
    PayloadTooLarge(usize),
    /// 413: a file or body is over a limit the message names (an upload, a download).
    #[error("{0}")]
    TooLarge(String),
    /// 422: the request is well-formed but cannot be carried out, and sending it again
    /// will not change that (the conversation is full).
    #[error("{0}")]
    Unprocessable(String),
    /// 429: a limit is reached; `Retry-After` says when to try again.
    #[error("{message}")]
    TooManyRequests {
        /// What limit, for the user.
        message: String,
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// 503: something the request needs is not available now (no provider of the rojo is);
    /// the message says what and how to fix it.
    #[error("{0}")]
    Unavailable(String),
    /// 503: the server is at a limit of work running at once (file transfers); the
    /// message names it, `Retry-After` says when to try again.
    #[error("{message}")]
    Busy {
        /// What limit, for the user.
        message: String,
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// 408: the request's body did not arrive within its time limit.
    #[error("{0}")]
    RequestTimeout(String),
    /// 500: something failed inside the server; what was being done and why (with every
    /// source) is logged, not returned.
    #[error("internal error")]
    Internal {
        /// What the server was doing.
        context: String,
        /// Why it failed, when another error says so.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl ApiError {
    /// A 500 for `context` that failed because of `source`.
    pub fn internal(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> ApiError {
        ApiError::Internal {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// A 500 for a state the server should never be in (no other error to blame).
    pub fn inconsistent(context: impl Into<String>) -> ApiError {
        ApiError::Internal {
            context: context.into(),
            source: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::PayloadTooLarge(_) | ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) | ApiError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Internal { context, source } => {
                let cause = source
                    .as_deref()
                    .map(|e| rojos_agent::error_chain(e))
                    .unwrap_or_default();
                tracing::error!(%context, %cause, "internal error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let mut response = (status, Json(json!({ "error": self.to_string() }))).into_response();
        if let ApiError::TooManyRequests { retry_after, .. } | ApiError::Busy { retry_after, .. } =
            &self
        {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(*retry_after),
            );
        }
        if let ApiError::MethodNotAllowed { allow, .. } = &self {
            response.headers_mut().insert(
                axum::http::header::ALLOW,
                axum::http::HeaderValue::from_static(allow),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_keeps_its_source_and_shows_the_user_nothing_of_it() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "storage is read-only");
        let error = ApiError::internal("listing storage", io);
        let source = std::error::Error::source(&error).expect("the cause is kept");
        assert_eq!(source.to_string(), "storage is read-only");
        assert_eq!(error.to_string(), "internal error");
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(std::error::Error::source(&ApiError::inconsistent("no client")).is_none());
    }
}
