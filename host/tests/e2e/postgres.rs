//! The real `rojos` binary on a PostgreSQL conversation store (`[store] backend =
//! "postgres"`), against a throwaway server: chats work; with the server stopped `/readyz`
//! and `POST /chat` answer `503` with a clear message, a stream already running ends with
//! `ERROR` then `DONE`, and `/healthz` stays `200`; with it started again chats work without
//! restarting rojos (the pool reconnects by itself), on the history acknowledged before.
//! Also `rojos migrate`, and a password in the store's url refused without showing it.

use std::sync::OnceLock;
use std::time::Duration;

use rojos_conversations::test_cluster::PgCluster;
use rojos_conversations::POSTGRES_SCHEMA_VERSION;
use serde_json::{json, Value};

use crate::support::{
    binary::{rojos, run, RunningBinary},
    host::{chat_at, client, stored_messages_at, HostConfig},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

pub(super) const UNAVAILABLE: &str =
    "the conversation database cannot be reached right now; try again in a moment";

/// The environment variable the tests' `[store]` names for the password.
pub(super) const PASSWORD_VAR: &str = "ROJOS_E2E_PG_PASSWORD";

/// A PostgreSQL server of its own, for a test that stops and starts it.
pub(super) fn own_cluster() -> PgCluster {
    PgCluster::start().unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"))
}

/// The PostgreSQL server of the tests that never stop it, stopped when the binary exits.
pub(super) fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start()
            .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"))
    })
}

/// A config folder whose `rojos.toml` keeps conversations in a new database of `cluster`.
pub(super) fn config_dir(cluster: &PgCluster, upstream: &ScriptedUpstream) -> tempfile::TempDir {
    let database = cluster.create_database().unwrap();
    let store = format!(
        "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n\
         connect_timeout_secs = 2\n",
        cluster.url(&database)
    );
    let config = HostConfig::builtins().upstream(upstream).with(&store);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rojos.toml"), config.render()).unwrap();
    dir
}

/// `rojos` serving `dir`, with `cluster`'s password in its environment.
pub(super) fn serve(cluster: &PgCluster, dir: &tempfile::TempDir) -> (RunningBinary, String) {
    let password = cluster.password();
    let rojos = RunningBinary::start(dir.path(), "info", &[(PASSWORD_VAR, &password)]);
    let url = rojos.url();
    (rojos, url)
}

pub(super) async fn chat(url: &str, text: &str, conversation: Option<&str>) -> reqwest::Response {
    let mut body = json!({"projectId": "demo", "message": text});
    if let Some(id) = conversation {
        body["conversationId"] = json!(id);
    }
    chat_at(url, &body).await
}

async fn get(url: &str, path: &str) -> (u16, String) {
    let response = client().get(format!("{url}{path}")).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `chat`, sent again while it is refused with `409` (for thirty seconds at most): for a
/// conversation whose lease is still held by a run that could not release it (a host
/// killed, or a database that was down when the run ended).
pub(super) async fn chat_once_free(url: &str, text: &str, conversation: &str) -> reqwest::Response {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = chat(url, text, Some(conversation)).await;
        if response.status() != 409 || std::time::Instant::now() > deadline {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `content` of each stored message of `conversation`.
async fn said(url: &str, conversation: &str) -> Vec<String> {
    stored_messages_at(url, conversation)
        .await
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn error_of(body: &str) -> String {
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    body["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_answers_503_and_chats_resume_when_it_is_back() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("before the outage"),
        Turn::text("after the outage"),
    ])
    .await;
    let cluster = own_cluster();
    let dir = config_dir(&cluster, &upstream);
    let (_rojos, url) = serve(&cluster, &dir);
    let first = Stream::read(chat(&url, "one", None).await).await;
    assert_eq!(first.text(), "before the outage");
    let (conversation, _) = first.done();
    assert_eq!(get(&url, "/readyz").await, (200, "ready\n".to_owned()));

    cluster.stop_server().unwrap();
    let (status, body) = get(&url, "/readyz").await;
    assert_eq!((status, error_of(&body).as_str()), (503, UNAVAILABLE));
    let refused = chat(&url, "two", Some(&conversation)).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(error_of(&refused.text().await.unwrap()), UNAVAILABLE);
    assert_eq!(get(&url, "/healthz").await.0, 200);

    cluster.start_server().unwrap();
    assert_eq!(get(&url, "/readyz").await.0, 200);
    let again = Stream::read(chat(&url, "three", Some(&conversation)).await).await;
    assert_eq!(again.text(), "after the outage");
    assert_eq!(
        said(&url, &conversation).await,
        ["one", "before the outage", "three", "after the outage"]
    );
    upstream.assert_consumed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_running_when_the_database_stops_ends_with_error_then_done() {
    let upstream = ScriptedUpstream::start(vec![
        Turn::text("a reply written slowly").chunk_delay(Duration::from_millis(700)),
        Turn::text("after the outage"),
    ])
    .await;
    let cluster = own_cluster();
    let dir = config_dir(&cluster, &upstream);
    let (_rojos, url) = serve(&cluster, &dir);
    let running = chat(&url, "one", None).await;
    assert_eq!(running.status(), 200);
    upstream.until_received(1).await;

    cluster.stop_server().unwrap();
    let ended = Stream::read(running).await;
    cluster.start_server().unwrap();

    let errors = ended.errors();
    assert_eq!(errors.len(), 1, "{ended:#?}");
    assert!(
        errors[0].starts_with("the conversation could not be saved"),
        "{errors:?}"
    );
    assert!(
        errors[0].ends_with("the database is unreachable"),
        "{errors:?}"
    );
    let (conversation, _) = ended.done();
    // The user message was stored before the reply started: it is kept, and the
    // conversation goes on from it once the run's lease, which could not be released while
    // the database was down, is released by a retry.
    let next = Stream::read(chat_once_free(&url, "two", &conversation).await).await;
    assert_eq!(next.text(), "after the outage");
    let said = said(&url, &conversation).await;
    assert_eq!(said.first().map(String::as_str), Some("one"), "{said:?}");
    assert_eq!(
        said.last().map(String::as_str),
        Some("after the outage"),
        "{said:?}"
    );
    assert!(said.iter().any(|m| m == "two"), "{said:?}");
}

#[test]
fn rojos_migrate_migrates_once_then_says_the_schema_is_current() {
    let cluster = cluster();
    let database = cluster.create_database().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n",
        cluster.url(&database)
    );
    let path = dir.path().join("rojos.toml");
    std::fs::write(&path, config).unwrap();
    let migrate = || {
        let mut command = rojos(&["--config", &path.to_string_lossy(), "migrate"]);
        command.env(PASSWORD_VAR, cluster.password());
        run(command)
    };

    let first = migrate();
    let second = migrate();

    let shown = cluster.url(&database);
    assert_eq!(first.code, Some(0), "{first}");
    assert_eq!(
        first.stdout,
        format!("conversation database {shown} migrated from schema version 0 to {POSTGRES_SCHEMA_VERSION}\n")
    );
    assert_eq!(second.code, Some(0), "{second}");
    assert_eq!(
        second.stdout,
        format!("conversation database {shown} is already at schema version {POSTGRES_SCHEMA_VERSION}\n")
    );
}

#[test]
fn a_password_in_the_store_url_is_refused_without_showing_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rojos.toml");
    std::fs::write(
        &path,
        "[store]\nbackend = \"postgres\"\nurl = \"postgres://rojos:hunter22-secret@127.0.0.1:1/x\"\n",
    )
    .unwrap();

    let ran = run(rojos(&["--config", &path.to_string_lossy(), "migrate"]));

    assert_eq!(ran.code, Some(2), "{ran}");
    assert_eq!(
        ran.stderr,
        "rojos: store.url: a password inside the url is refused: put it in an environment \
         variable and name that variable in store.password_env\n"
    );
    assert!(!ran.stdout.contains("hunter22"), "{ran}");
}
