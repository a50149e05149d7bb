//! Every error answer has the API's body `{"error": "…"}` (`docs/api.md`, "Errors"), also
//! where no handler of ours runs: a path no route has (`404`), a route's path with a method it
//! does not have (`405`, with `Allow`), and a method `/mcp` does not have.

use serde_json::{json, Value};

use crate::support::host::{client, HostConfig, TestHost, TOKEN};

/// `method path` with the all-projects token: status, `Allow`, content type and JSON body.
async fn answer(
    host: &TestHost,
    method: reqwest::Method,
    path: &str,
) -> (u16, Option<String>, String, Value) {
    let response = client()
        .request(method, format!("{}{path}", host.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (allow, kind) = (header("allow"), header("content-type").unwrap_or_default());
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: the body is not JSON ({e}): {text:?}"));
    (status, allow, kind, body)
}

#[tokio::test]
async fn errors_an_unknown_route_and_a_wrong_method_answer_with_the_error_body() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let (status, _, kind, body) = answer(&host, reqwest::Method::GET, "/no/such/route").await;
    assert_eq!((status, kind.as_str()), (404, "application/json"));
    assert_eq!(
        body,
        json!({"error": "no route for GET /no/such/route: docs/api.md lists the routes"})
    );

    let (status, allow, kind, body) = answer(&host, reqwest::Method::PUT, "/chat").await;
    assert_eq!((status, kind.as_str()), (405, "application/json"));
    assert_eq!(allow.as_deref(), Some("POST"));
    assert_eq!(body, json!({"error": "PUT is not allowed on /chat"}));

    let (status, allow, _, body) = answer(&host, reqwest::Method::DELETE, "/conversations").await;
    assert_eq!(status, 405);
    assert_eq!(allow.as_deref(), Some("GET,HEAD"));
    assert_eq!(
        body,
        json!({"error": "DELETE is not allowed on /conversations"})
    );

    let (status, allow, _, body) = answer(&host, reqwest::Method::PUT, "/mcp/demo").await;
    assert_eq!(status, 405);
    assert_eq!(allow.as_deref(), Some("GET, POST, DELETE"));
    assert_eq!(
        body,
        json!({"error": "PUT is not allowed on /mcp: use GET, POST, DELETE"})
    );
}
