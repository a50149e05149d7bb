//! The host on a PostgreSQL conversation store (`[store] backend = "postgres"`), against a
//! throwaway server: chats work; with the server stopped `/readyz` and `POST /chat` answer
//! `503` with a clear message while `/healthz` stays `200`; with it started again chats work
//! without restarting the host (the pool reconnects by itself).

use std::sync::OnceLock;

use rojos_conversations::test_cluster::PgCluster;
use serde_json::{json, Value};

use crate::support::{
    host::{client, HostConfig, TestHost},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

const UNAVAILABLE: &str =
    "the conversation database cannot be reached right now; try again in a moment";

/// The environment variable the tests' `[store]` names for the password.
const PASSWORD_VAR: &str = "ROJOS_E2E_PG_PASSWORD";

/// This binary's PostgreSQL server, stopped when the binary exits.
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let cluster = PgCluster::start()
            .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"));
        // Every test sets the same value: the password of this one cluster.
        std::env::set_var(PASSWORD_VAR, cluster.password());
        cluster
    })
}

fn store_section(cluster: &PgCluster, database: &str) -> String {
    format!(
        "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n\
         connect_timeout_secs = 2\n",
        cluster.url(database)
    )
}

fn chat(text: &str, conversation: Option<&str>) -> Value {
    match conversation {
        Some(id) => json!({"projectId": "demo", "conversationId": id, "message": text}),
        None => json!({"projectId": "demo", "message": text}),
    }
}

async fn get(host: &TestHost, path: &str) -> (u16, String) {
    let response = client()
        .get(format!("{}{path}", host.url))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_answers_503_and_chats_resume_when_it_is_back() {
    let cluster = cluster();
    let database = cluster.create_database().unwrap();
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("before the outage"),
        Turn::text("after the outage"),
    ])
    .await;
    let config = HostConfig::builtins()
        .upstream(&upstream)
        .with(&store_section(cluster, &database));
    let host = TestHost::start(config).await;

    let first = Stream::read(host.chat(chat("one", None)).await).await;
    assert_eq!(first.text(), "before the outage");
    let (conversation, _) = first.done();
    assert_eq!(get(&host, "/readyz").await, (200, "ready\n".to_owned()));

    cluster.stop_server().unwrap();
    let (status, body) = get(&host, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        UNAVAILABLE
    );
    let refused = host.chat(chat("two", Some(&conversation))).await;
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], UNAVAILABLE);
    assert_eq!(get(&host, "/healthz").await.0, 200);

    cluster.start_server().unwrap();
    assert_eq!(get(&host, "/readyz").await.0, 200);
    let again = Stream::read(host.chat(chat("three", Some(&conversation))).await).await;
    assert_eq!(again.text(), "after the outage");
    let stored = host.stored_messages(&conversation).await;
    let said: Vec<&str> = stored
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        said,
        ["one", "before the outage", "three", "after the outage"]
    );
    upstream.assert_consumed();
}
