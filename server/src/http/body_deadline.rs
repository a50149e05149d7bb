//! Every request body has a time limit, `[limits] body_timeout_secs` (docs/configuration.md,
//! docs/security.md "Every request body has a time limit"): a body that has not arrived whole
//! by then is answered `408` with the API's error body, and the connection is closed, so a
//! client that sends a body slowly (or never) holds no handler, no buffer and no connection
//! past the limit. Bodies are read here, within `[server] max_body_bytes`, before any route
//! sees them; uploads stream to disk under their own deadline (`files::upload`) and are left
//! to it. tower-http's request-body timeout limits each wait between two pieces of a body,
//! not the whole of it, so it would not stop a client sending a byte just before each wait
//! ends.

use axum::{
    body::Body,
    extract::{Request, State},
    http::{header, HeaderValue, Method},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::error::ApiError;
use crate::state::AppState;

/// Reads the request's body whole within `[limits] body_timeout_secs`, then passes the
/// request on; `408` (connection closed) when it did not arrive in time, `413` past
/// `[server] max_body_bytes`.
pub(super) async fn read_within_limit(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if is_upload(&request) {
        return next.run(request).await;
    }
    let limit = state.config.transfers.body_timeout;
    let max = state.config.max_body_bytes;
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(limit, axum::body::to_bytes(body, max)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => {
            let mut response = body_error(&e, max).into_response();
            close(&mut response);
            response
        }
        Err(_) => {
            let mut response = ApiError::RequestTimeout(format!(
                "the request body did not arrive whole within {} s ([limits] \
                 body_timeout_secs): nothing was done; send it again over a faster connection",
                limit.as_secs_f64()
            ))
            .into_response();
            close(&mut response);
            response
        }
    }
}

/// Whether `request` is an upload (`PUT /projects/{id}/files/content`), which streams its
/// body to disk under its own deadline.
fn is_upload(request: &Request) -> bool {
    request.method() == Method::PUT
        && request
            .uri()
            .path()
            .strip_prefix("/projects/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(_, rest)| rest == "files/content")
}

/// Asks for the connection to be closed after the answer: the rest of the body is not read.
fn close(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}

/// A body that could not be read: `413` past `max`, else `400`.
pub(super) fn body_error(error: &axum::Error, max: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return ApiError::PayloadTooLarge(max);
        }
        source = cause.source();
    }
    ApiError::BadRequest(format!("the request body could not be read: {error}"))
}
