//! Conversation search under attack, on the real `rojos` binary with either store: a token
//! searches many large conversations for a long text that nearly matches everywhere. A second
//! search of the same token while the first runs answers `429`; meanwhile another token's
//! list, read and chat in its own project complete; when the searching client leaves, its
//! query is stopped (the host logs it; PostgreSQL cancels it on the server), and the token
//! searches again. Nothing is timed: the slow search's cost (every candidate message checked)
//! keeps it running while the other token reads, which the test checks before and after.

use futures_util::future::{select, Either};
use rojos_conversations::{ConversationStore, PostgresOptions, PostgresStore, SqliteStore, Step};
use serde_json::{json, Value};

use crate::postgres::{cluster, PASSWORD_VAR};
use crate::support::{
    binary::RunningBinary,
    host::{client, stored_messages_at, HostConfig, DEMO_TOKEN, TOKEN},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// Conversations seeded in `demo`, each with an answer of [`ANSWER_BYTES`]: more for SQLite,
/// whose check of a candidate is linear, than for PostgreSQL, whose `ILIKE` check is not.
const SEEDED_SQLITE: usize = 150;
const SEEDED_POSTGRES: usize = 60;
const ANSWER_BYTES: usize = 1 << 20;

/// The searched text: 200 `a`s. Every seeded answer holds runs of 199 `a`s and each of the
/// text's three-character sequences, so each one is a candidate the search must check, and
/// none matches.
fn slow_text() -> String {
    "a".repeat(200)
}

/// A seeded answer: runs of 199 `a`s, each ended by a `b`.
fn near_miss() -> String {
    let block = format!("{}b", "a".repeat(199));
    block.repeat(ANSWER_BYTES / block.len())
}

/// Seeds `store` with the conversations of `demo` (`hello 0.`, `hello 1.`, … and their answers).
async fn seed(store: &dyn ConversationStore, count: usize) {
    let answer = near_miss();
    for i in 0..count {
        let step = Step::new(&[
            json!({"role": "user", "content": format!("hello {i}.")}),
            json!({"role": "assistant", "content": answer}),
        ])
        .unwrap();
        store.create_with("demo", "default", step).await.unwrap();
    }
}

/// `GET /conversations?projectId=demo&q=TEXT` as `token`: status and body.
async fn search(url: String, token: &'static str, text: String) -> (u16, Value) {
    let response = client()
        .get(format!("{url}/conversations"))
        .query(&[("projectId", "demo"), ("q", text.as_str())])
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get_as_all(url: &str, path: &str) -> (u16, Value) {
    let response = client()
        .get(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// What a backend adds to the scenario: how to see that the stopped search holds nothing.
enum Stopped<'a> {
    /// The host's log line.
    Sqlite,
    /// The host's log line, and no search statement left running on the server.
    Postgres { database: &'a str },
}

/// The scenario on a running `rojos` at `url` whose `demo` project is seeded.
async fn searches_are_bounded(rojos: &RunningBinary, url: &str, stopped: Stopped<'_>) {
    // Another token's own conversation, in its own project.
    let other = json!({"projectId": "other", "message": "mine"});
    let first = Stream::read(crate::support::host::chat_at(url, &other).await).await;
    let (theirs, _) = first.done();

    // Two searches of one token at once: one runs, the other is refused.
    let one = tokio::spawn(search(url.to_owned(), DEMO_TOKEN, slow_text()));
    let two = tokio::spawn(search(url.to_owned(), DEMO_TOKEN, slow_text()));
    let (answered, running) = match select(one, two).await {
        Either::Left((answered, running)) | Either::Right((answered, running)) => {
            (answered.unwrap(), running)
        }
    };
    assert_eq!(
        answered.0, 429,
        "a second search of the same token while its first runs: {}",
        answered.1
    );
    assert!(
        answered.1["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("a search of this token is still running"),
        "{}",
        answered.1
    );

    // The other token's list, read and chat complete while the search runs.
    let (status, listed) = get_as_all(url, "/conversations?projectId=other").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed[0]["id"], theirs.as_str());
    let said = stored_messages_at(url, &theirs).await;
    assert_eq!(said.len(), 2);
    let next = Stream::read(
        crate::support::host::chat_at(
            url,
            &json!({"projectId": "other", "conversationId": theirs, "message": "more"}),
        )
        .await,
    )
    .await;
    assert!(next.errors().is_empty(), "{next:#?}");
    assert!(
        !running.is_finished(),
        "the slow search ended before the other token's reads did: seed more"
    );
    let (status, body) = search(url.to_owned(), DEMO_TOKEN, "zzz".to_owned()).await;
    assert_eq!(status, 429, "the slow search still runs: {body}");

    // Its client leaves: the query is stopped and the token may search again.
    running.abort();
    match stopped {
        Stopped::Sqlite => {
            RunningBinary::wait_for(
                &rojos.stderr,
                "a search was stopped: its request went away",
                "the stopped search's log line",
            );
        }
        Stopped::Postgres { database } => {
            RunningBinary::wait_for(
                &rojos.stderr,
                "a search was cancelled: its request went away",
                "the cancelled search's log line",
            );
            let running_searches = "SELECT count(*) FROM pg_stat_activity
                 WHERE query LIKE '%search_text ILIKE%' AND state = 'active'
                 AND pid <> pg_backend_pid()";
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let left = cluster().psql(database, running_searches).unwrap();
                if left.trim() == "0" {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the cancelled search still runs on the server"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    let (status, found) = search(url.to_owned(), DEMO_TOKEN, "hello 7.".to_owned()).await;
    assert_eq!(status, 200, "{found}");
    let titles: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["title"].as_str())
        .collect();
    assert_eq!(titles, ["hello 7."]);
}

fn upstream_turns() -> Vec<Turn> {
    vec![Turn::text("yours"), Turn::text("still yours")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_one_search_per_token_never_delays_others_and_stops_when_its_client_leaves() {
    let upstream = ScriptedUpstream::start(upstream_turns()).await;
    let dir = HostConfig::builtins()
        .upstream(&upstream)
        .with("[store]\nsearch_timeout_secs = 600\n")
        .in_temp_folder();
    let store = SqliteStore::open(dir.path().join("storage/rojos.db")).unwrap();
    seed(&store, SEEDED_SQLITE).await;
    drop(store);
    let rojos = RunningBinary::start(dir.path(), "info", &[]);
    let url = rojos.url();
    searches_are_bounded(&rojos, &url, Stopped::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_one_search_per_token_never_delays_others_and_is_cancelled_when_its_client_leaves(
) {
    let upstream = ScriptedUpstream::start(upstream_turns()).await;
    let cluster = cluster();
    let database = cluster.create_database().unwrap();
    let url = cluster.url(&database);
    let dir = HostConfig::builtins()
        .upstream(&upstream)
        .with(&format!(
            "[store]\nbackend = \"postgres\"\nurl = \"{url}\"\npassword_env = \"{PASSWORD_VAR}\"\n\
             search_timeout_secs = 600\n"
        ))
        .in_temp_folder();
    let options = PostgresOptions::from_url(&url)
        .unwrap()
        .with_password(&cluster.password());
    let store = PostgresStore::connect(&options).await.unwrap();
    seed(&store, SEEDED_POSTGRES).await;
    let password = cluster.password();
    let rojos = RunningBinary::start(dir.path(), "info", &[(PASSWORD_VAR, &password)]);
    let url = rojos.url();
    searches_are_bounded(
        &rojos,
        &url,
        Stopped::Postgres {
            database: &database,
        },
    )
    .await;
}
