//! Connecting to a Streamable HTTP MCP server (`url` in `[mcp.servers.NAME]`; `docs/mcp.md`,
//! "HTTP servers"): rmcp's client transport with the configured headers on every request,
//! then the MCP handshake. The session it gives is ended like a stdio one (`process::stop`:
//! rmcp sends the session's DELETE).

use std::collections::HashMap;

use http::{HeaderName, HeaderValue};
use rmcp::{
    service::ServiceExt,
    transport::{
        streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport,
    },
};

use super::{
    lists::ListFeed,
    process::{Session, StartFailure},
};
use crate::config::HttpServer;

/// Connects to `server` and does the handshake (the caller bounds the time); the server's
/// later tool lists go to `feed`.
pub(super) async fn connect(server: &HttpServer, feed: ListFeed) -> Result<Session, StartFailure> {
    install_crypto_provider();
    let config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str())
        .custom_headers(headers(server)?);
    let transport = StreamableHttpClientTransport::from_config(config);
    match feed.serve(transport).await {
        Ok(service) => Ok(Session::remote(service)),
        Err(error) => Err(classify(&server.url, &error)),
    }
}

/// rmcp's reqwest is built without a TLS crypto provider of its own (the workspace uses
/// ring, not aws-lc); it panics on building a client unless one is installed, so ring is
/// installed as the process's default once. An `Err` means one is installed already.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The configured headers as HTTP headers (their names and values were checked when the
/// config was read; this holds them to it again rather than trusting it).
fn headers(server: &HttpServer) -> Result<HashMap<HeaderName, HeaderValue>, StartFailure> {
    server
        .headers
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::try_from(name.as_str());
            let value = HeaderValue::try_from(value.expose());
            match (name, value) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    Ok((name, value))
                }
                _ => Err(StartFailure::Handshake(
                    "a configured header is not a valid HTTP header".to_owned(),
                )),
            }
        })
        .collect()
}

/// What a failed connection or handshake means for the operator. rmcp's error wraps the
/// transport's (whose type names rmcp's own reqwest), so it is read from the error chain's
/// text: a 401 shows as "Auth required" (with a `WWW-Authenticate` header) or as the status,
/// a refused connection as reqwest's "Connect" error.
fn classify(url: &str, error: &(dyn std::error::Error + 'static)) -> StartFailure {
    let chain = error_chain(error);
    let url = url.to_owned();
    let reason = chain.clone();
    if chain.contains("Auth required") || chain.contains("401") {
        StartFailure::Unauthorized {
            url,
            status: "401 Unauthorized",
            reason,
        }
    } else if chain.contains("Insufficient scope") || chain.contains("403") {
        StartFailure::Unauthorized {
            url,
            status: "403 Forbidden",
            reason,
        }
    } else if chain.contains("Connect") || chain.contains("onnection refused") {
        StartFailure::Unreachable { url, reason }
    } else {
        StartFailure::Handshake(reason)
    }
}

/// `error` and its sources, joined by ": ".
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
