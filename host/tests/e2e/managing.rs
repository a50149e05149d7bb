//! Managing conversations over real HTTP: `PATCH` (rename), `DELETE` (refused `409` while a
//! reply is written), `GET /conversations?q=` (search), and `POST /chat` with `regenerate` or
//! `editLast` (the upstream sees the history without the replaced messages, the store keeps
//! the new ones), each with its refusals: 400, 401, 403, 404, 409, 422. A failed run's
//! note for the panel is stored but never sent upstream. The same on the real binary over a
//! PostgreSQL store (its leases in the database).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost, DEMO_TOKEN, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// `method path` with `token` and an optional JSON body.
async fn send(
    host: &TestHost,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = client().request(method, format!("{}{path}", host.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("the host answers")
}

async fn rename(host: &TestHost, id: &str, token: &str, body: Value) -> reqwest::Response {
    let path = format!("/conversations/{id}");
    send(host, reqwest::Method::PATCH, &path, Some(token), Some(body)).await
}

async fn delete(host: &TestHost, id: &str, token: Option<&str>) -> reqwest::Response {
    let path = format!("/conversations/{id}");
    send(host, reqwest::Method::DELETE, &path, token, None).await
}

async fn error_of(response: reqwest::Response, status: u16) -> String {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    body["error"].as_str().unwrap().to_owned()
}

async fn list(host: &TestHost, query: &str) -> Vec<(String, String)> {
    let response = host.get(&format!("/conversations?{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    let list: Vec<Value> = response.json().await.unwrap();
    list.iter()
        .map(|c| {
            let title = c["title"].as_str().unwrap_or("").to_owned();
            (c["id"].as_str().unwrap().to_owned(), title)
        })
        .collect()
}

async fn start_chat(host: &TestHost, project: &str, text: &str) -> String {
    let body = json!({"projectId": project, "message": text});
    Stream::read(host.chat(body).await).await.done().0
}

fn content_of(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let role = m["role"].as_str().unwrap().to_owned();
            (role, m["content"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
        .collect()
}

#[tokio::test]
async fn a_conversation_is_renamed_and_back_with_400_401_403_404_for_bad_requests() {
    let upstream = ScriptedUpstream::start(vec![Turn::text("a"), Turn::text("b")]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let id = start_chat(&host, "demo", "first words").await;
    let elsewhere = start_chat(&host, "other", "not yours").await;

    let renamed = rename(&host, &id, DEMO_TOKEN, json!({"title": "  My plan "})).await;
    assert_eq!(renamed.status(), 204);
    assert_eq!(
        list(&host, "projectId=demo").await,
        [(id.clone(), "My plan".to_owned())]
    );
    let back = rename(&host, &id, TOKEN, json!({"title": null})).await;
    assert_eq!(back.status(), 204);
    assert_eq!(list(&host, "projectId=demo").await[0].1, "first words");

    let shape = "the body must be {\"title\": \"new title\"}, or {\"title\": null} to go back to \
                 the first message's text";
    for body in [
        json!({"title": 3}),
        json!({"name": "x"}),
        json!({"title": "x", "more": 1}),
    ] {
        assert_eq!(
            error_of(rename(&host, &id, TOKEN, body).await, 400).await,
            shape
        );
    }
    assert_eq!(
        error_of(
            rename(&host, &id, TOKEN, json!({"title": "two\nlines"})).await,
            400
        )
        .await,
        "invalid title: it holds the control character '\\n'; use one line of plain text"
    );
    assert_eq!(
        error_of(
            rename(&host, &id, TOKEN, json!({"title": "x".repeat(81)})).await,
            400
        )
        .await,
        "invalid title: it is longer than 80 characters (81); shorten it"
    );
    assert_eq!(
        rename(&host, "bad id!", TOKEN, json!({"title": "x"}))
            .await
            .status(),
        400
    );
    let path = format!("/conversations/{id}");
    let anonymous = send(
        &host,
        reqwest::Method::PATCH,
        &path,
        None,
        Some(json!({"title": "x"})),
    );
    assert_eq!(anonymous.await.status(), 401);
    let wrong = rename(&host, &id, "not-a-token", json!({"title": "x"})).await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        error_of(
            rename(&host, &elsewhere, DEMO_TOKEN, json!({"title": "x"})).await,
            403
        )
        .await,
        "this token is not allowed on project other"
    );
    assert_eq!(
        error_of(
            rename(&host, "nosuchconversation", TOKEN, json!({"title": "x"})).await,
            404
        )
        .await,
        "no conversation nosuchconversation"
    );
    assert_eq!(
        list(&host, "projectId=demo").await[0].1,
        "first words",
        "nothing refused changed it"
    );
    assert_eq!(list(&host, "projectId=other").await[0].1, "not yours");
}

#[tokio::test]
async fn a_conversation_is_deleted_with_its_messages_but_not_while_a_reply_is_written() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::text("slow answer").chunk_delay(Duration::from_secs(1)),
        Turn::text("elsewhere"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let id = start_chat(&host, "demo", "first").await;
    let elsewhere = start_chat(&host, "other", "elsewhere").await;

    let writing = host
        .chat(json!({"projectId": "demo", "conversationId": id, "message": "second"}))
        .await;
    assert_eq!(writing.status(), 200);
    upstream.until_received(2).await;
    assert_eq!(
        error_of(delete(&host, &id, Some(TOKEN)).await, 409).await,
        "a reply is still being written in this conversation; wait for it to finish or stop \
         it, then delete it"
    );
    let written = Stream::read(writing).await;
    assert_eq!(
        written.done().1,
        "completed",
        "the refused delete did not disturb the run"
    );

    assert_eq!(delete(&host, &id, None).await.status(), 401);
    assert_eq!(
        error_of(delete(&host, &elsewhere, Some(DEMO_TOKEN)).await, 403).await,
        "this token is not allowed on project other"
    );
    assert_eq!(delete(&host, "bad id!", Some(TOKEN)).await.status(), 400);
    assert_eq!(
        host.stored_messages(&id).await.len(),
        4,
        "nothing refused deleted it"
    );

    assert_eq!(delete(&host, &id, Some(DEMO_TOKEN)).await.status(), 204);

    assert_eq!(
        host.get(&format!("/conversations/{id}")).await.status(),
        404
    );
    assert!(list(&host, "projectId=demo").await.is_empty());
    assert_eq!(
        error_of(delete(&host, &id, Some(TOKEN)).await, 404).await,
        format!("no conversation {id}")
    );
    let continued = host
        .chat(json!({"projectId": "demo", "conversationId": id, "message": "more"}))
        .await;
    assert_eq!(continued.status(), 404);
    assert_eq!(
        list(&host, "projectId=other").await.len(),
        1,
        "others are kept"
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn search_finds_titles_and_message_text_newest_first_with_400_and_403() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("The README is at the top"),
        Turn::text("nothing here"),
        Turn::text("nor here"),
        Turn::text("other project"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let by_answer = start_chat(&host, "demo", "where are the docs?").await;
    let by_title = start_chat(&host, "demo", "something").await;
    let unrelated = start_chat(&host, "demo", "unrelated").await;
    start_chat(&host, "other", "readme elsewhere").await;
    let renamed = rename(&host, &by_title, TOKEN, json!({"title": "ReadMe plans"})).await;
    assert_eq!(renamed.status(), 204);

    let found = list(&host, "projectId=demo&q=%20readme%20").await;

    let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [by_title.as_str(), by_answer.as_str()]);
    assert_eq!(
        list(&host, "projectId=demo&q=readme&limit=1").await.len(),
        1
    );
    assert_eq!(
        list(&host, "projectId=demo&q=").await.len(),
        3,
        "blank lists all"
    );
    assert!(list(&host, "projectId=demo&q=50%25").await.is_empty());
    assert!(found.iter().all(|(id, _)| *id != unrelated));

    let long = "x".repeat(201);
    assert_eq!(
        error_of(
            host.get(&format!("/conversations?projectId=demo&q={long}"))
                .await,
            400
        )
        .await,
        "q is 201 characters long, over the limit of 200; search for a shorter text"
    );
    assert_eq!(host.get("/conversations?q=readme").await.status(), 400);
    let other = client()
        .get(format!(
            "{}/conversations?projectId=other&q=readme",
            host.url
        ))
        .bearer_auth(DEMO_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 403);
    let anonymous = client()
        .get(format!(
            "{}/conversations?projectId=demo&q=readme",
            host.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn regenerate_sends_the_history_before_the_last_answer_and_replaces_it() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("answer one"),
        Turn::tool_calls(&[("call_1", "list_files", json!({"path": "."}))]),
        Turn::text("answer two"),
        Turn::text("answer two, again"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let id = start_chat(&host, "demo", "one").await;
    let body = json!({"projectId": "demo", "conversationId": id, "message": "two"});
    Stream::read(host.chat(body).await).await;
    assert_eq!(host.stored_messages(&id).await.len(), 6);

    let again = json!({"projectId": "demo", "conversationId": id, "regenerate": true});
    let stream = Stream::read(host.chat(again).await).await;

    assert_eq!(stream.text(), "answer two, again");
    assert_eq!(stream.done(), (id.clone(), "completed".to_owned()));
    let sent = upstream.received()[3].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        content_of(&sent),
        pairs(&[
            ("user", "one"),
            ("assistant", "answer one"),
            ("user", "two")
        ])
    );
    assert_eq!(
        content_of(&host.stored_messages(&id).await),
        pairs(&[
            ("user", "one"),
            ("assistant", "answer one"),
            ("user", "two"),
            ("assistant", "answer two, again"),
        ])
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn edit_last_replaces_the_last_user_message_even_in_a_full_conversation() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("short answer"),
        Turn::text(&"n".repeat(65_000)),
        Turn::text("answer to the edit"),
    ])
    .await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with("[limits]\nmax_conversation_bytes = 65536"),
    )
    .await;
    let id = start_chat(&host, "demo", "one").await;
    let body = json!({"projectId": "demo", "conversationId": id, "message": "x".repeat(1_000)});
    Stream::read(host.chat(body).await).await;
    let more = json!({"projectId": "demo", "conversationId": id, "message": "more"});
    assert_eq!(
        host.chat(more).await.status(),
        422,
        "the conversation is full"
    );

    let too_big = json!({"projectId": "demo", "conversationId": id, "editLast": true,
                         "message": "y".repeat(70_000)});
    assert!(error_of(host.chat(too_big).await, 422)
        .await
        .starts_with("this message (70028 bytes) does not fit"));
    let edit = json!({"projectId": "demo", "conversationId": id, "editLast": true,
                      "message": "two, shorter"});
    let stream = Stream::read(host.chat(edit).await).await;

    assert_eq!(stream.text(), "answer to the edit");
    let sent = upstream.received()[2].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        content_of(&sent),
        pairs(&[
            ("user", "one"),
            ("assistant", "short answer"),
            ("user", "two, shorter")
        ])
    );
    let stored = host.stored_messages(&id).await;
    assert_eq!(
        content_of(&stored),
        pairs(&[
            ("user", "one"),
            ("assistant", "short answer"),
            ("user", "two, shorter"),
            ("assistant", "answer to the edit"),
        ])
    );
    let listed: Vec<Value> = host
        .get("/conversations?projectId=demo")
        .await
        .json()
        .await
        .unwrap();
    let bytes: usize = stored.iter().map(|m| m.to_string().len()).sum();
    assert_eq!(
        listed[0]["storedBytes"],
        json!(bytes),
        "the size shrank with the edit"
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn regenerate_and_edit_are_refused_with_400_403_404_and_409_without_touching_the_history() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("answer"),
        Turn::text("other"),
        Turn::text("slow").chunk_delay(Duration::from_secs(1)),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let id = start_chat(&host, "demo", "one").await;
    let elsewhere = start_chat(&host, "other", "other").await;
    let with = |extra: Value| {
        let mut body = json!({"projectId": "demo", "conversationId": id});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };

    let cases = [
        (
            with(json!({"regenerate": true, "message": "x"})),
            "regenerate sends the last user message again and takes no message; use editLast \
             to send a different one",
        ),
        (
            with(json!({"regenerate": true, "editLast": true})),
            "regenerate and editLast cannot be combined: regenerate sends the last message \
             again, editLast sends a new one in its place",
        ),
        (
            with(json!({"editLast": true})),
            "invalid body: missing field `message` (the text to send)",
        ),
        (
            json!({"projectId": "demo", "regenerate": true}),
            "regenerate and editLast need the conversationId of the conversation to change",
        ),
    ];
    for (body, error) in cases {
        assert_eq!(
            error_of(host.chat(body.clone()).await, 400).await,
            error,
            "{body}"
        );
    }
    let foreign = json!({"projectId": "other", "conversationId": elsewhere, "regenerate": true});
    assert_eq!(host.chat_as(DEMO_TOKEN, foreign).await.status(), 403);
    let unknown = json!({"projectId": "demo", "conversationId": "nope", "regenerate": true});
    assert_eq!(host.chat(unknown).await.status(), 404);

    let writing = host.chat(with(json!({"message": "two"}))).await;
    upstream.until_received(3).await;
    let busy = host.chat(with(json!({"regenerate": true}))).await;
    assert_eq!(
        error_of(busy, 409).await,
        "a reply is still being written in this conversation; wait for it to finish or stop it"
    );
    Stream::read(writing).await;
    assert_eq!(
        content_of(&host.stored_messages(&id).await),
        pairs(&[
            ("user", "one"),
            ("assistant", "answer"),
            ("user", "two"),
            ("assistant", "slow")
        ])
    );
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_failed_runs_note_is_stored_for_the_panel_but_never_sent_upstream() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::status(400, "the provider refused"),
        Turn::text("fine now"),
    ])
    .await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    let failed = Stream::read(
        host.chat(json!({"projectId": "demo", "message": "one"}))
            .await,
    )
    .await;
    let (id, stop) = failed.done();
    assert_eq!(stop, "provider_error");
    let error = failed.errors()[0].clone();

    let body = json!({"projectId": "demo", "conversationId": id, "message": "two"});
    Stream::read(host.chat(body).await).await;

    let stored = host.stored_messages(&id).await;
    assert_eq!(
        stored[1],
        json!({"role": "assistant", "content": format!("(no answer: {error})"),
               "rojos": {"error": error, "noAnswer": true}})
    );
    let sent = upstream.received()[1].body["messages"].clone();
    assert!(
        sent.as_array()
            .unwrap()
            .iter()
            .all(|m| m.get("rojos").is_none()),
        "{sent}"
    );
    assert_eq!(
        content_of(sent.as_array().unwrap()),
        pairs(&[
            ("user", "one"),
            ("assistant", &format!("(no answer: {error})")),
            ("user", "two"),
        ])
    );
}

/// `method url+path` with the all-projects token and an optional JSON body.
async fn send_at(
    url: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = client()
        .request(method, format!("{url}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("the host answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_conversations_are_renamed_searched_regenerated_and_deleted() {
    use crate::postgres::{cluster, config_dir, serve};
    use crate::support::host::{chat_at, stored_messages_at};

    let upstream = ScriptedUpstream::start(vec![
        Turn::text("first answer"),
        Turn::text("second answer").chunk_delay(Duration::from_millis(700)),
        Turn::text("second answer, regenerated"),
    ])
    .await;
    let dir = config_dir(cluster(), &upstream);
    let (_rojos, url) = serve(cluster(), &dir);
    let first = json!({"projectId": "demo", "message": "Where is the README?"});
    let (id, _) = Stream::read(chat_at(&url, &first).await).await.done();
    let body = json!({"projectId": "demo", "conversationId": id, "message": "two"});
    let writing = chat_at(&url, &body).await;
    upstream.until_received(2).await;
    let path = format!("/conversations/{id}");
    let busy = send_at(&url, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(busy.status(), 409, "the run's lease is in the database");
    Stream::read(writing).await;

    let renamed = json!({"title": "Docs"});
    let renamed = send_at(&url, reqwest::Method::PATCH, &path, Some(renamed)).await;
    assert_eq!(renamed.status(), 204);
    let search = "/conversations?projectId=demo&q=readme";
    let found: Vec<Value> = send_at(&url, reqwest::Method::GET, search, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["title"], "Docs");

    let again = json!({"projectId": "demo", "conversationId": id, "regenerate": true});
    let stream = Stream::read(chat_at(&url, &again).await).await;
    assert_eq!(stream.text(), "second answer, regenerated");
    assert_eq!(
        content_of(&stored_messages_at(&url, &id).await),
        pairs(&[
            ("user", "Where is the README?"),
            ("assistant", "first answer"),
            ("user", "two"),
            ("assistant", "second answer, regenerated"),
        ])
    );

    let deleted = send_at(&url, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(deleted.status(), 204);
    let gone = send_at(&url, reqwest::Method::GET, &path, None).await;
    assert_eq!(gone.status(), 404);
    upstream.assert_consumed();
}
