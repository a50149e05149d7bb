//! `GET /metrics`: the server's counters, gauges and histograms in the Prometheus text format
//! (0.0.4), for any valid bearer token (Prometheus sends it with `authorization.credentials`).

use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Response},
};
use rojos_metrics::CONTENT_TYPE;

use super::auth::Caller;
use crate::state::AppState;

pub(super) async fn get(_caller: Caller, State(state): State<AppState>) -> Response {
    let registry = state.registry.snapshot();
    state.metrics.quarantined(
        registry
            .tools()
            .filter(|t| t.quarantined().is_some())
            .map(|t| t.name()),
    );
    let text = state.metrics.render(registry.tools().count());
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}
