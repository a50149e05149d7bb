//! The handshake sessions of `/mcp` under attack (`docs/mcp.md`, "Sessions"), over real HTTP
//! against the real server: a token past `[limits] max_mcp_sessions_per_token` is refused
//! `429` (a JSON-RPC error the official Python SDK shows its user) while another token is
//! admitted; past `max_mcp_sessions` every token is refused `503`; a session unused for
//! `mcp_session_idle_secs` ends and gives its place back; and a session is its token's only:
//! another token's request or `DELETE` with its id is answered `404`, exactly as for an id
//! that never existed, and the session lives on.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{
    metrics::value as metric_value,
    support::host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
};

/// The SDK session script of `mcp_server.rs`.
const SESSION_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/mcp/session.py");

/// The revision an `initialize` asks for.
const REVISION: &str = "2025-11-25";

/// What a raw request got back.
#[derive(Debug)]
struct Answer {
    status: u16,
    session: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Answer {
    /// The JSON-RPC message of an SSE or JSON body.
    fn message(&self) -> Value {
        let json = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .unwrap_or(&self.body);
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// One MCP request to `/mcp/demo` with `token`, in `session` when given.
async fn send(
    url: &str,
    method: reqwest::Method,
    token: &str,
    session: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut request = client()
        .request(method, format!("{url}/mcp/demo"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", REVISION);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the host answers");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (session, retry_after) = (header("mcp-session-id"), header("retry-after"));
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    Answer {
        status,
        session,
        retry_after,
        body,
    }
}

/// `initialize`, and `notifications/initialized` when it opened a session.
async fn initialize(url: &str, token: &str) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": REVISION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }});
    let answer = send(url, reqwest::Method::POST, token, None, Some(body)).await;
    if let Some(session) = &answer.session {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let sent = send(
            url,
            reqwest::Method::POST,
            token,
            Some(session),
            Some(initialized),
        );
        assert_eq!(sent.await.status, 202);
    }
    answer
}

/// A session `token` opens: its id.
async fn open(url: &str, token: &str) -> String {
    let answer = initialize(url, token).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.session.expect("an Mcp-Session-Id")
}

/// `tools/list` in `session` with `token`.
async fn list(url: &str, token: &str, session: &str) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    send(url, reqwest::Method::POST, token, Some(session), Some(body)).await
}

/// `DELETE` of `session` with `token`.
async fn delete(url: &str, token: &str, session: &str) -> Answer {
    send(url, reqwest::Method::DELETE, token, Some(session), None).await
}

/// A host whose `[limits]` has `limits`.
async fn host(limits: &str) -> TestHost {
    TestHost::start(HostConfig::builtins().with(&format!("[limits]\n{limits}"))).await
}

/// `GET /metrics` as text.
async fn metrics(url: &str) -> String {
    let response = client()
        .get(format!("{url}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    response.text().await.unwrap()
}

#[tokio::test]
async fn mcp_sessions_a_token_past_its_limit_is_refused_while_another_token_is_admitted() {
    let host = host("max_mcp_sessions_per_token = 2\nmax_mcp_sessions = 10").await;
    let url = &host.url;
    let first = open(url, DEMO_TOKEN).await;
    open(url, DEMO_TOKEN).await;

    let refused = initialize(url, DEMO_TOKEN).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.session, None);
    assert_eq!(refused.retry_after.as_deref(), Some("300"));
    assert_eq!(
        refused.message(),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message":
            "this token is at its limit of 2 open MCP sessions ([limits] \
             max_mcp_sessions_per_token): end one with DELETE, or wait until one has gone \
             unused for 300 s"}})
    );
    // Another token still opens sessions.
    open(url, TOKEN).await;

    // The official SDK shows its user why.
    let sdk = tokio::process::Command::new("python3")
        .arg(SESSION_SCRIPT)
        .args([&format!("{url}/mcp/demo"), DEMO_TOKEN, "legacy", "[]"])
        .output()
        .await
        .expect("python3 runs (install Python 3 and: python3 -m pip install 'mcp>=2.3,<3')");
    assert_ne!(
        sdk.status.code(),
        Some(3),
        "install: python3 -m pip install 'mcp>=2.3,<3'"
    );
    let stderr = String::from_utf8_lossy(&sdk.stderr);
    assert!(!sdk.status.success(), "{stderr}");
    assert!(
        stderr.contains("this token is at its limit of 2 open MCP sessions"),
        "{stderr}"
    );

    // A session ended with DELETE gives its place back.
    assert_eq!(delete(url, DEMO_TOKEN, &first).await.status, 202);
    open(url, DEMO_TOKEN).await;
    let text = metrics(url).await;
    assert_eq!(
        metric_value(&text, "rojos_mcp_sessions_open"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        metric_value(
            &text,
            r#"rojos_requests_limited_total{limit="mcp_sessions_per_token"}"#
        ),
        Some(2.0),
        "{text}"
    );
}

#[tokio::test]
async fn mcp_sessions_past_the_servers_limit_every_token_is_refused() {
    let host = host("max_mcp_sessions_per_token = 5\nmax_mcp_sessions = 2").await;
    let url = &host.url;
    open(url, DEMO_TOKEN).await;
    let other = open(url, TOKEN).await;
    for token in [DEMO_TOKEN, TOKEN] {
        let refused = initialize(url, token).await;
        assert_eq!(refused.status, 503, "{refused:?}");
        assert_eq!(refused.session, None);
        assert_eq!(
            refused.message()["error"]["message"],
            "the server is at its limit of 2 open MCP sessions ([limits] max_mcp_sessions); \
             try again later"
        );
    }
    // The sessions already open are untouched, and a place freed is taken again.
    assert_eq!(list(url, TOKEN, &other).await.status, 200);
    assert_eq!(delete(url, TOKEN, &other).await.status, 202);
    open(url, DEMO_TOKEN).await;
    let text = metrics(url).await;
    assert_eq!(
        metric_value(
            &text,
            r#"rojos_requests_limited_total{limit="mcp_sessions"}"#
        ),
        Some(2.0),
        "{text}"
    );
}

#[tokio::test]
async fn mcp_sessions_a_session_unused_for_the_idle_time_ends_and_frees_its_place() {
    // The idle time must be longer than a tool call's time-out (2 s here).
    let host = host("max_mcp_sessions_per_token = 1\nmcp_session_idle_secs = 3").await;
    let url = &host.url;
    let idle = open(url, DEMO_TOKEN).await;
    assert_eq!(initialize(url, DEMO_TOKEN).await.status, 429);

    // Nothing is sent in the idle session while waiting: a request would keep it alive.
    let deadline = Instant::now() + Duration::from_secs(60);
    let reopened = loop {
        let answer = initialize(url, DEMO_TOKEN).await;
        if answer.status == 200 {
            break answer.session.unwrap();
        }
        assert_eq!(answer.status, 429, "{answer:?}");
        assert!(Instant::now() < deadline, "the idle session never ended");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_ne!(reopened, idle);
    let gone = list(url, DEMO_TOKEN, &idle).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    assert_eq!(list(url, DEMO_TOKEN, &reopened).await.status, 200);
}

#[tokio::test]
async fn mcp_sessions_another_tokens_use_or_delete_is_answered_as_for_no_session() {
    let host = host("").await;
    let url = &host.url;
    let session = open(url, TOKEN).await;
    let unknown = list(url, DEMO_TOKEN, "no-such-session").await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(unknown.message()["error"]["code"], -32001, "{unknown:?}");

    // DEMO_TOKEN may use project demo, but not TOKEN's session on it.
    let used = list(url, DEMO_TOKEN, &session).await;
    assert_eq!((used.status, &used.body), (404, &unknown.body));
    let stream = send(url, reqwest::Method::GET, DEMO_TOKEN, Some(&session), None).await;
    assert_eq!((stream.status, &stream.body), (404, &unknown.body));
    let deleted = delete(url, DEMO_TOKEN, &session).await;
    assert_eq!((deleted.status, &deleted.body), (404, &unknown.body));

    // The session lives on for its own token, which alone can end it.
    let listed = list(url, TOKEN, &session).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.message()["result"]["tools"].is_array(), "{listed:?}");
    assert_eq!(delete(url, TOKEN, &session).await.status, 202);
    assert_eq!(list(url, TOKEN, &session).await.status, 404);
}
