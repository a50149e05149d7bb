//! `GET /metrics`: Prometheus text for any valid token, and exact counts after a known set of
//! conversations (one complete, one failing at the provider, one calling an unknown tool).

use serde_json::json;

use crate::support::{
    host::{HostConfig, TestHost, DEMO_TOKEN},
    ndjson::Stream,
    seed,
    upstream::{ScriptedUpstream, Turn},
    BUILTIN_TOOLS,
};

/// The value of the series `series` (name and labels exactly as rendered).
pub(crate) fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn metrics_report_the_counts_of_known_conversations() {
    let mut turns = seed::turns();
    turns.push(Turn::status(400, "bad request"));
    turns.push(Turn::tool_calls(&[("c1", "no_such_tool", json!({}))]));
    turns.push(Turn::text("That tool does not exist."));
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;

    let seeded = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(seeded.done().1, "completed");
    let failed = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(failed.done().1, "provider_error");
    let unknown = Stream::read(host.chat(seed::body("demo")).await).await;
    assert_eq!(unknown.done().1, "completed");
    assert!(!unknown.results()[0].1, "the unknown tool failed");
    upstream.assert_consumed();

    let response = host.get("/metrics").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    let expected = [
        ("rojos_chats_started_total", 3.0),
        (
            r#"rojos_chats_finished_total{stop_reason="completed"}"#,
            2.0,
        ),
        (
            r#"rojos_chats_finished_total{stop_reason="provider_error"}"#,
            1.0,
        ),
        ("rojos_model_turns_total", 6.0),
        ("rojos_model_turn_duration_seconds_count", 6.0),
        (
            r#"rojos_tool_calls_total{tool="create_directory",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_calls_total{tool="write_text_content",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_calls_total{tool="unknown",outcome="error"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_call_duration_seconds_count{tool="create_directory"}"#,
            1.0,
        ),
        (
            r#"rojos_tool_call_duration_seconds_count{tool="write_text_content"}"#,
            1.0,
        ),
        (r#"rojos_provider_errors_total{kind="status"}"#, 1.0),
        ("rojos_streams_open", 0.0),
        ("rojos_plugins_loaded", BUILTIN_TOOLS.len() as f64),
    ];
    for (series, count) in expected {
        assert_eq!(value(&text, series), Some(count), "{series} in\n{text}");
    }
    for family in [
        "rojos_chats_started_total counter",
        "rojos_model_turn_duration_seconds histogram",
        "rojos_tool_call_duration_seconds histogram",
        "rojos_streams_open gauge",
    ] {
        assert!(
            text.lines().any(|l| l == format!("# TYPE {family}")),
            "# TYPE {family} in\n{text}"
        );
    }
}

#[tokio::test]
async fn metrics_need_a_valid_token_of_any_scope() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let anonymous = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let scoped = crate::support::host::client()
        .get(format!("{}/metrics", host.url))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 200);
    let text = scoped.text().await.unwrap();
    assert_eq!(value(&text, "rojos_chats_started_total"), Some(0.0));
}
