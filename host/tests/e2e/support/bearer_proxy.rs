//! A loopback reverse proxy that adds `Authorization: Bearer …` to every request, for MCP
//! clients that cannot send headers (the official conformance suite's server mode has no
//! header option). It forwards method, headers and body to one fixed URL and streams the
//! answer back unchanged (SSE included); the real route keeps its authentication.

use std::sync::Arc;

use axum::{
    body::Body,
    extract::{Request, State},
    http::header,
    response::Response,
    Router,
};

/// Where the proxy forwards, and with which token.
struct Upstream {
    url: String,
    token: String,
    client: reqwest::Client,
}

/// A running proxy; it stops with the test's runtime.
pub struct BearerProxy {
    /// The proxy's own URL (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
}

impl BearerProxy {
    /// Serves `http://127.0.0.1:PORT/mcp`, forwarding every request to `url` with `token`.
    pub async fn start(url: &str, token: &str) -> BearerProxy {
        let upstream = Arc::new(Upstream {
            url: url.to_owned(),
            token: token.to_owned(),
            client: reqwest::Client::new(),
        });
        let app = Router::new().fallback(forward).with_state(upstream);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        BearerProxy {
            url: format!("http://{address}/mcp"),
        }
    }
}

/// One request, forwarded with the token; the answer streamed back.
async fn forward(State(upstream): State<Arc<Upstream>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let mut forwarded = upstream
        .client
        .request(parts.method, &upstream.url)
        .bearer_auth(&upstream.token)
        .body(body);
    for (name, value) in &parts.headers {
        // The `Host` is the upstream's and the length is the client library's to set.
        if name != header::HOST && name != header::CONTENT_LENGTH {
            forwarded = forwarded.header(name, value);
        }
    }
    let answer = match forwarded.send().await {
        Ok(answer) => answer,
        Err(e) => {
            return Response::builder()
                .status(502)
                .body(Body::from(format!("the proxy cannot reach the host: {e}")))
                .unwrap()
        }
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}
