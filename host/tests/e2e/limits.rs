//! The chat limits: over `[server] max_concurrent_chats` open streams, over a token's
//! `[server] max_chats_per_token`, or over its `[auth] rate_limit_per_minute`, `POST /chat`
//! answers `429` with `Retry-After` at once, and admits chats again once a stream ends or the
//! wait has passed. Nothing here times anything:
//! the slow turn only keeps the first stream open while the second request is refused.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

fn chat(text: &str) -> Value {
    json!({"projectId": "demo", "message": text})
}

/// Asserts a `429` with a whole-seconds `Retry-After`; returns the error text and the wait.
async fn refused(response: reqwest::Response) -> (String, u64) {
    assert_eq!(response.status(), 429);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After is whole seconds");
    assert!(retry_after >= 1);
    let body: Value = response.json().await.unwrap();
    (body["error"].as_str().unwrap().to_owned(), retry_after)
}

#[tokio::test]
async fn over_the_concurrency_limit_a_chat_gets_429_until_a_stream_ends() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("slow answer").first_delay(Duration::from_secs(2)),
        Turn::text("second answer"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .server("max_concurrent_chats = 1"),
    )
    .await;

    let first = host.chat(chat("first")).await;
    assert_eq!(first.status(), 200);
    let (message, retry_after) = refused(host.chat(chat("second")).await).await;
    assert_eq!(
        message,
        "the server is at its limit of 1 open chats; try again shortly"
    );
    assert_eq!(retry_after, 1);
    assert_eq!(
        host.get("/healthz").await.status(),
        200,
        "health is not limited"
    );

    // The first stream ends; its place is free again.
    let first = Stream::read(first).await;
    assert_eq!(first.text(), "slow answer");
    let second = Stream::read(host.chat(chat("second")).await).await;
    assert_eq!(second.text(), "second answer");
    assert_eq!(second.done().1, "completed");

    let metrics = host.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"rojos_requests_limited_total{limit="concurrency"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn over_its_rate_a_token_gets_429_and_is_admitted_after_retry_after() {
    let host = TestHost::start(HostConfig::builtins().auth("rate_limit_per_minute = 60")).await;
    // An empty message is refused with 400 after admission: it uses the rate without
    // starting a chat. The burst is one minute's worth.
    let empty = chat(" ");
    let mut admitted = 0;
    let response = loop {
        let response = host.chat(empty.clone()).await;
        if response.status() != 400 {
            break response;
        }
        admitted += 1;
        assert!(admitted <= 200, "the rate limit never answered 429");
    };
    assert!(admitted >= 60, "a burst of 60 is allowed, got {admitted}");
    let (message, retry_after) = refused(response).await;
    assert_eq!(
        message,
        format!("this token may start 60 chats per minute; try again in {retry_after} s")
    );

    // Tokens are limited separately.
    assert_eq!(host.chat_as(DEMO_TOKEN, empty.clone()).await.status(), 400);

    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    assert_eq!(
        host.chat_as(TOKEN, empty).await.status(),
        400,
        "admitted again after Retry-After"
    );
}

#[tokio::test]
async fn one_token_at_its_open_chat_limit_does_not_lock_another_token_out() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("slow answer, still streaming").chunk_delay(Duration::from_secs(1)),
        Turn::text("the other token's answer"),
        Turn::text("second answer"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .server("max_chats_per_token = 1"),
    )
    .await;

    let first = host.chat(chat("first")).await;
    assert_eq!(first.status(), 200);
    upstream.until_received(1).await;
    let (message, retry_after) = refused(host.chat(chat("second")).await).await;
    assert_eq!(
        message,
        "this token is at its limit of 1 open chats ([server] max_chats_per_token); \
         try again when one ends"
    );
    assert_eq!(retry_after, 1);
    let other = Stream::read(host.chat_as(DEMO_TOKEN, chat("other")).await).await;
    assert_eq!(other.text(), "the other token's answer");

    // The token's stream ends; it may open another.
    let first = Stream::read(first).await;
    assert_eq!(first.text(), "slow answer, still streaming");
    let second = Stream::read(host.chat(chat("second")).await).await;
    assert_eq!(second.text(), "second answer");
    upstream.assert_consumed();

    let metrics = host.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"rojos_requests_limited_total{limit="token"} 1"#),
        "{metrics}"
    );
}
