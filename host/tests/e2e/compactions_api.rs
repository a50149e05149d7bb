//! `GET /conversations/{id}/compactions` over real HTTP (`docs/api.md`, "Long
//! conversations"): after a conversation outgrew its model's window (a scripted upstream
//! that enforces it, a host told a small `context_tokens`), it lists the summaries the
//! stream announced with `CONTEXT_COMPACTED`, each with the number of stored messages it
//! stands for (a user message starts where it stops), while `GET /conversations/{id}` still
//! returns every message; `400` for a malformed id, `404` for an unknown one, `403` for
//! another project's, `401` without a token.

use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN},
    ndjson::{Event, Stream},
    upstream::{ScriptedUpstream, Turn},
};

/// OpenAI's answer to a request over the window.
const OVERFLOW: &str = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

async fn ask(host: &TestHost, project: &str, conversation: Option<&str>, n: usize) -> Stream {
    let mut body =
        json!({"projectId": project, "message": format!("Message {n}: what is note.txt about?")});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    let stream = Stream::read(host.chat(body).await).await;
    assert_eq!(stream.errors(), Vec::<String>::new(), "message {n}");
    assert_eq!(stream.done().1, "completed", "message {n}");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summaries_a_conversation_was_compacted_into_are_listed_where_they_apply() {
    let upstream = ScriptedUpstream::start_windowed(
        8_192,
        (400, OVERFLOW),
        Turn::tool_calls(&[("call_read", "get_text_content", json!({"path": "note.txt"}))]),
        Turn::text("It is a note about kettles."),
    )
    .await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with("[rojos.default]\nprovider = \"scripted\"\ntools = \"*\"\ncontext_tokens = 8192\n");
    let host = TestHost::start(config).await;
    let root = host.project_root("demo");
    std::fs::create_dir_all(&root).unwrap();
    let note: String = (0..160)
        .map(|n| format!("Line {n:03}: kettles boil water for tea.\n"))
        .collect();
    std::fs::write(root.join("note.txt"), note).unwrap();

    let conversation = ask(&host, "demo", None, 0).await.done().0;
    let path = format!("/conversations/{conversation}/compactions");
    let none: Value = host.get(&path).await.json().await.unwrap();
    assert_eq!(none, json!([]), "nothing summarised yet");
    let mut announced = Vec::new();
    for n in 1..40 {
        let stream = ask(&host, "demo", Some(&conversation), n).await;
        for event in &stream.events {
            if let Event::ContextCompacted { covers, summary } = event {
                announced.push(json!({"covers": covers, "summary": summary}));
            }
        }
        if announced.len() >= 2 {
            break;
        }
    }
    assert!(!announced.is_empty(), "the conversation was compacted");

    let response = host.get(&path).await;
    assert_eq!(response.status(), 200);
    let listed: Value = response.json().await.unwrap();
    assert_eq!(listed, Value::Array(announced.clone()));
    let stored = host.stored_messages(&conversation).await;
    for compaction in &announced {
        let covers = usize::try_from(compaction["covers"].as_u64().unwrap()).unwrap();
        assert!(covers > 0 && covers < stored.len(), "{compaction}");
        assert_eq!(
            stored[covers]["role"], "user",
            "a summary stops before a user message"
        );
    }

    // The refusals, as `GET /conversations/{id}`'s.
    assert_eq!(
        host.get("/conversations/no!such/compactions")
            .await
            .status(),
        400
    );
    let unknown = host
        .get("/conversations/AAAAAAAAAAAAAAAAAAAAAA/compactions")
        .await;
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("no conversation"),
        "{body}"
    );
    let elsewhere = ask(&host, "other", None, 0).await.done().0;
    let foreign = client()
        .get(format!(
            "{}/conversations/{elsewhere}/compactions",
            host.url
        ))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let anonymous = client()
        .get(format!("{}{path}", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}
