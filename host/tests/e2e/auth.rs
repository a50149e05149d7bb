//! `POST /chat` and `GET /conversations` (one, or a project's list) refusals before
//! streaming: 401, 403, 400, 404, 413, each with a `{"error": ...}` body, and a `projectId`
//! that never reaches the file system unless it is a plain folder name.

use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

async fn status_and_error(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("a JSON error body");
    (
        status,
        body["error"].as_str().expect("an error message").to_owned(),
    )
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_401() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let body = json!({"projectId": "demo", "message": "hi"});
    let none = client()
        .post(format!("{}/chat", host.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        status_and_error(none).await,
        (401, "missing or invalid bearer token".to_owned())
    );
    let wrong = host.chat_as("not-a-token", body).await;
    assert_eq!(wrong.status(), 401);
}

#[tokio::test]
async fn a_token_used_on_a_project_outside_its_scope_is_403() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let response = host
        .chat_as(DEMO_TOKEN, json!({"projectId": "other", "message": "hi"}))
        .await;
    assert_eq!(
        status_and_error(response).await,
        (403, "this token is not allowed on project other".to_owned())
    );
    assert!(
        !host.dir.path().join("storage/other").exists(),
        "nothing created for a refused project"
    );
}

#[tokio::test]
async fn every_path_like_project_id_is_400_before_touching_the_disk() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let long = "a".repeat(300);
    let cases = [
        json!(".."),
        json!("a/../.."),
        json!("/etc"),
        json!(""),
        json!("."),
        json!("a\u{0}b"),
        json!("%2e%2e"),
        json!("demo/"),
        json!(" demo"),
        json!("a\\b"),
        json!("dеmo"),
        json!(long),
        json!(3),
        json!(null),
    ];
    for project in cases {
        let response = host
            .chat(json!({"projectId": project, "message": "hi"}))
            .await;
        let (status, error) = status_and_error(response).await;
        assert_eq!(status, 400, "{project}: {error}");
    }
    let entries: Vec<String> = std::fs::read_dir(host.dir.path().join("storage"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("rojos.db"))
        .collect();
    assert!(
        entries.is_empty(),
        "no project folder was created: {entries:?}"
    );
}

#[tokio::test]
async fn malformed_bodies_and_unknown_rojos_are_400() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let cases = [
        (json!({"projectId": "demo"}), "missing field `message`"),
        (
            json!({"projectId": "demo", "message": "hi", "rojo": "nobody"}),
            "unknown rojo \"nobody\"",
        ),
        (
            json!({"projectId": "demo", "message": "   "}),
            "message must not be empty",
        ),
        (
            json!({"projectId": "demo", "message": "hi", "conversationID": "x"}),
            "unknown field `conversationID`",
        ),
        (
            json!({"projectId": "demo", "message": "hi", "conversationId": "../x"}),
            "conversation",
        ),
        (json!(["not", "an", "object"]), "invalid type"),
    ];
    for (body, expected) in cases {
        let (status, error) = status_and_error(host.chat(body.clone()).await).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert!(error.contains(expected), "{body}: {error}");
    }
    let not_json = client()
        .post(format!("{}/chat", host.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let host = TestHost::start(HostConfig::builtins()).await;
    let big = "x".repeat(1_100_000);
    let (status, error) = status_and_error(
        host.chat(json!({"projectId": "demo", "message": big}))
            .await,
    )
    .await;
    assert_eq!(
        (status, error.as_str()),
        (413, "request body too large (limit 1048576 bytes)")
    );
}

#[tokio::test]
async fn a_conversation_cannot_be_used_or_read_from_another_project() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("hello")]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "hi"}))
            .await,
    )
    .await;
    let (conversation, _) = stream.done();

    let reuse = host
        .chat(json!({"projectId": "other", "conversationId": conversation, "message": "hi"}))
        .await;
    let (status, error) = status_and_error(reuse).await;
    assert_eq!(
        (status, error),
        (
            403,
            format!("conversation {conversation} belongs to another project")
        )
    );

    let unknown = host
        .chat(json!({"projectId": "demo", "conversationId": "AAAAAAAAAAAAAAAAAAAAAA", "message": "hi"}))
        .await;
    assert_eq!(status_and_error(unknown).await.0, 404);

    // Reading it needs a token allowed on its project.
    let read = |token: &'static str, id: String| {
        let url = format!("{}/conversations/{id}", host.url);
        async move { client().get(url).bearer_auth(token).send().await.unwrap() }
    };
    assert_eq!(read(DEMO_TOKEN, conversation.clone()).await.status(), 200);
    upstream.push([Turn::text("hello other")]);
    let other = Stream::read(
        host.chat(json!({"projectId": "other", "message": "hi"}))
            .await,
    )
    .await;
    let (status, error) = status_and_error(read(DEMO_TOKEN, other.done().0).await).await;
    assert_eq!(
        (status, error.as_str()),
        (403, "this token is not allowed on project other")
    );
    assert_eq!(
        upstream.received().len(),
        2,
        "refused requests never reached the model"
    );
}

#[tokio::test]
async fn listing_conversations_needs_a_token_allowed_on_the_project() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("hello other")]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let other = Stream::read(
        host.chat(json!({"projectId": "other", "message": "a secret title"}))
            .await,
    )
    .await;
    assert_eq!(other.done().1, "completed");
    let list = |token: &'static str, project: &str| {
        let url = format!("{}/conversations?projectId={project}", host.url);
        async move { client().get(url).bearer_auth(token).send().await.unwrap() }
    };
    let (status, error) = status_and_error(list(DEMO_TOKEN, "other").await).await;
    assert_eq!(
        (status, error.as_str()),
        (403, "this token is not allowed on project other")
    );
    // The same token lists its own project; the all-projects token sees `other`'s.
    assert_eq!(list(DEMO_TOKEN, "demo").await.status(), 200);
    let listed: Vec<Value> = list(TOKEN, "other").await.json().await.unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn the_users_token_never_reaches_the_provider() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("hello")]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    Stream::read(
        host.chat(json!({"projectId": "demo", "message": "hi"}))
            .await,
    )
    .await;
    let received = &upstream.received()[0];
    assert!(
        received.headers.get("authorization").is_none(),
        "no key configured, no Authorization sent"
    );
    let all_headers = format!("{:?}", received.headers);
    assert!(!all_headers.contains(TOKEN));
}
