//! `GET /conversations?q=` over real HTTP: each hit carries the snippet of its first
//! matching message (`docs/api.md`, "Managing conversations"): the message's index, the text
//! before the match, the match as the message has it and the text after it, markup left as
//! text; `null` for a hit by its title only; a plain listing has no `snippet` at all.

use serde_json::{json, Value};

use crate::support::{
    host::{HostConfig, TestHost},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

async fn start_chat(host: &TestHost, message: &str) -> String {
    let stream = Stream::read(
        host.chat(json!({"projectId": "demo", "message": message}))
            .await,
    )
    .await;
    assert_eq!(stream.done().1, "completed");
    stream.done().0
}

async fn search(host: &TestHost, query: &str) -> Vec<Value> {
    let response = host
        .get(&format!("/conversations?projectId=demo&{query}"))
        .await;
    assert_eq!(response.status(), 200, "{query}");
    let body: Value = response.json().await.unwrap();
    body.as_array().unwrap().clone()
}

#[tokio::test]
async fn search_hits_carry_a_snippet_of_their_first_matching_message() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("The spare KETTLE is in the <b>kitchen</b> drawer, under the towels."),
        Turn::text("No idea."),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let by_answer = start_chat(&host, "where is the spare one?").await;
    let by_title = start_chat(&host, "kettle prices").await;

    let hits = search(&host, "q=kettle").await;

    let ids: Vec<&str> = hits.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [by_title.as_str(), by_answer.as_str()]);
    // The newer conversation's title is its first message, which also holds the text: its
    // snippet is that message's.
    assert_eq!(
        hits[0]["snippet"],
        json!({"message": 0, "before": "", "match": "kettle", "after": " prices"})
    );
    assert_eq!(
        hits[1]["snippet"],
        json!({
            "message": 1,
            "before": "The spare ",
            "match": "KETTLE",
            "after": " is in the <b>kitchen</b> drawer, under the towels."
        })
    );
    // The summary's fields are all there beside it.
    for key in [
        "id",
        "rojo",
        "title",
        "updatedAt",
        "messageCount",
        "storedBytes",
    ] {
        assert!(hits[1].get(key).is_some(), "{key}: {}", hits[1]);
    }

    // A hit by its title only: `snippet` is null.
    let renamed = crate::support::host::client()
        .patch(format!("{}/conversations/{by_answer}", host.url))
        .bearer_auth(crate::support::host::TOKEN)
        .json(&json!({"title": "Where things are"}))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 204);
    let hits = search(&host, "q=things").await;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["snippet"], Value::Null);

    // Listing without a search: summaries only.
    let listed = search(&host, "limit=10").await;
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|c| c.get("snippet").is_none()),
        "{listed:?}"
    );
}
