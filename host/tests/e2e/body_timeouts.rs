//! Every request body has a time limit (docs/security.md, "Every request body has a time
//! limit"): a client that sends the head of a request with a body and then holds the body
//! back (a slow-loris client) is answered `408` with the API's error body once `[limits]
//! body_timeout_secs` has passed, on `/chat`, `/mcp`, an approval and an undo alike, and its
//! connection is closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use crate::support::host::{HostConfig, TestHost, TOKEN};

/// Sends the head of a `POST path` whose body is announced as 100 bytes, then only its first
/// byte; returns everything the server sent until it closed the connection (reads give up
/// after 30 s: a guard against a hanging test, not a measure).
fn held_body(address: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: rojos\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 100\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).expect("the head");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(e) => panic!(
                "{path}: the connection was not closed ({e}); seen: {}",
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn a_body_held_back_is_answered_408_on_every_route_and_its_connection_closed() {
    let host =
        TestHost::start(HostConfig::builtins().with("[limits]\nbody_timeout_secs = 1\n")).await;
    let address = host.url.trim_start_matches("http://").to_owned();
    for path in [
        "/chat",
        "/mcp",
        "/conversations/c1/approvals/a1",
        "/conversations/c1/undo",
    ] {
        let address = address.clone();
        let answer = tokio::task::spawn_blocking(move || held_body(&address, path))
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let body: Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{path}: not a JSON body ({e}): {answer}"));
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains("body_timeout_secs"), "{path}: {body}");
    }
}
