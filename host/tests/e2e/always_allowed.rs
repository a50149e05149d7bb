//! "Always allow" can be seen and taken back (`docs/api.md`, "Approvals"):
//! `GET /conversations/{id}/always-allowed` lists the tools a conversation runs without
//! asking, `DELETE /conversations/{id}/always-allowed/{tool}` takes one back, and the next
//! call of that tool is asked about again. Both are for a caller allowed on the
//! conversation's project, and refuse what they cannot do with a message that says why.

use serde_json::{json, Value};

use crate::approvals::{decide_at, OpenChat, APPROVING_ROJO};
use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::{Event, Stream},
    upstream::{ScriptedUpstream, Turn},
};

fn write_turn(id: &str, path: &str, text: &str) -> Turn {
    Turn::tool_calls(&[(
        id,
        "write_text_content",
        json!({"path": path, "text": text}),
    )])
}

/// `method` on `path` with `token` (none: no header): the status and JSON body.
async fn call(
    host: &TestHost,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
) -> (u16, Value) {
    let mut request = client().request(method, format!("{}{path}", host.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the host answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn asked(stream: &Stream) -> bool {
    stream
        .all
        .iter()
        .any(|e| matches!(e, Event::ApprovalRequired { .. }))
}

#[tokio::test]
async fn an_always_allowed_tool_is_listed_and_once_taken_back_is_asked_about_again() {
    let upstream = ScriptedUpstream::start(vec![
        write_turn("call_1", "a.txt", "one"),
        Turn::text("first"),
        write_turn("call_2", "b.txt", "two"),
        Turn::text("second"),
        write_turn("call_3", "c.txt", "three"),
        Turn::text("third"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with(APPROVING_ROJO),
    )
    .await;
    let mut chat =
        OpenChat::start_at(&host.url, json!({"projectId": "demo", "message": "one"})).await;
    chat.approval_required(1).await;
    let conversation = chat.conversation.clone().expect("the conversation");
    let list = format!("/conversations/{conversation}/always-allowed");
    assert_eq!(
        call(&host, reqwest::Method::GET, &list, Some(TOKEN)).await,
        (200, json!({"tools": []}))
    );
    let approval = chat.approval_id.clone().expect("an approval id");
    let (status, _) = decide_at(
        &host.url,
        Some(TOKEN),
        &conversation,
        &approval,
        json!({"decision": "approve_always"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(chat.finish().await.done().1, "completed");
    assert_eq!(
        call(&host, reqwest::Method::GET, &list, Some(DEMO_TOKEN)).await,
        (200, json!({"tools": ["write_text_content"]}))
    );

    let follow_up = json!({"projectId": "demo", "conversationId": conversation, "message": "two"});
    let second = Stream::read(host.chat(follow_up).await).await;
    assert!(
        !asked(&second),
        "always allowed: not asked {:?}",
        second.all
    );

    let revoke = format!("{list}/write_text_content");
    assert_eq!(
        call(&host, reqwest::Method::DELETE, &revoke, Some(TOKEN)).await,
        (200, json!({"tool": "write_text_content", "revoked": true}))
    );
    assert_eq!(
        call(&host, reqwest::Method::GET, &list, Some(TOKEN)).await,
        (200, json!({"tools": []}))
    );
    let mut third = OpenChat::start_at(
        &host.url,
        json!({"projectId": "demo", "conversationId": conversation, "message": "three"}),
    )
    .await;
    third.approval_required(1).await;
    let approval = third.approval_id.clone().expect("an approval id");
    let (status, _) = decide_at(
        &host.url,
        Some(TOKEN),
        &conversation,
        &approval,
        json!({"decision": "deny"}),
    )
    .await;
    assert_eq!(status, 200);
    third.finish().await;
    assert!(
        !host.project_root("demo").join("c.txt").exists(),
        "asked again and denied: not written"
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn the_always_allowed_endpoints_refuse_what_they_cannot_do() {
    let upstream =
        ScriptedUpstream::start(vec![Turn::text("hi demo"), Turn::text("hi other")]).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with(APPROVING_ROJO),
    )
    .await;
    let demo = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "hi"}))
            .await,
    )
    .await
    .done()
    .0;
    let other = Stream::read(
        host.chat(json!({"projectId": "other", "message": "hi"}))
            .await,
    )
    .await
    .done()
    .0;
    let get = reqwest::Method::GET;
    let delete = reqwest::Method::DELETE;
    let list = |id: &str| format!("/conversations/{id}/always-allowed");

    assert_eq!(call(&host, get.clone(), &list(&demo), None).await.0, 401);
    assert_eq!(
        call(&host, get.clone(), &list(&other), Some(DEMO_TOKEN))
            .await
            .0,
        403
    );
    let revoke_other = format!("{}/delete_path", list(&other));
    assert_eq!(
        call(&host, delete.clone(), &revoke_other, Some(DEMO_TOKEN))
            .await
            .0,
        403
    );
    let (status, body) = call(&host, get.clone(), &list("NoSuchConversation"), Some(TOKEN)).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = call(&host, get, &list("bad%20id"), Some(TOKEN)).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call(
        &host,
        delete,
        &format!("{}/delete_path", list(&demo)),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("not always allowed") && message.contains("always-allowed"),
        "{body}"
    );
}
