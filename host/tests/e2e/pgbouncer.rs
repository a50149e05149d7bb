//! The PostgreSQL store behind PgBouncer in `pool_mode = transaction` (Debian's
//! `pgbouncer`, in front of a throwaway cluster), with `[store] prepared_statements = false`:
//! two real hosts share the database through the pooler, with fewer server connections than
//! the hosts' pools hold, and every chat, follow-up, conversation read, list and search
//! answers as it does without the pooler, and each host follows the other's runs. Named prepared statements (the default) do not
//! survive transaction pooling: the pooler hands each transaction to any server connection.

use serde_json::Value;

use crate::postgres::{chat, cluster, PASSWORD_VAR};
use crate::support::{
    binary::RunningBinary,
    host::{client, get_at, stored_messages_at, HostConfig, TOKEN},
    ndjson::Stream,
    pgbouncer::PgBouncer,
    upstream::{ScriptedUpstream, Turn},
};

/// A config folder whose store is `database` through `bouncer`, unnamed statements.
fn config_dir(
    bouncer: &PgBouncer,
    database: &str,
    upstream: &ScriptedUpstream,
) -> tempfile::TempDir {
    let store = format!(
        "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n\
         connect_timeout_secs = 5\nprepared_statements = false\n",
        bouncer.url(database)
    );
    HostConfig::builtins()
        .upstream(upstream)
        .with(&store)
        .in_temp_folder()
}

async fn get_json(url: &str, path: &str) -> (u16, Value) {
    let response = client()
        .get(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A new conversation on `url` and a follow-up in it, read back: its id.
async fn converse(url: &str, name: &str) -> String {
    let first = Stream::read(chat(url, &format!("hello {name}"), None).await).await;
    assert!(first.errors().is_empty(), "{first:#?}");
    assert_eq!(first.text(), "pooled answer");
    let (conversation, _) = first.done();
    let next = Stream::read(chat(url, &format!("again {name}"), Some(&conversation)).await).await;
    assert!(next.errors().is_empty(), "{next:#?}");
    assert_eq!(next.text(), "pooled answer");
    let said: Vec<String> = stored_messages_at(url, &conversation)
        .await
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        said,
        [
            format!("hello {name}"),
            "pooled answer".to_owned(),
            format!("again {name}"),
            "pooled answer".to_owned()
        ]
    );
    conversation
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_behind_pgbouncer_in_transaction_mode_chat_read_list_and_search() {
    let cluster = cluster();
    let database = cluster.create_database().unwrap();
    // Two server connections for two hosts of up to 16 connections each: every host's
    // connection is served by whichever server connection is free, transaction by transaction.
    let bouncer = PgBouncer::start(cluster, 2);
    let upstream =
        ScriptedUpstream::start((0..16).map(|_| Turn::text("pooled answer")).collect()).await;
    let password = cluster.password();
    let dirs = [
        config_dir(&bouncer, &database, &upstream),
        config_dir(&bouncer, &database, &upstream),
    ];
    let hosts: Vec<RunningBinary> = dirs
        .iter()
        .map(|dir| RunningBinary::start(dir.path(), "info", &[(PASSWORD_VAR, &password)]))
        .collect();
    let (a, b) = (hosts[0].url(), hosts[1].url());

    let (one, two, three, four) = tokio::join!(
        converse(&a, "one"),
        converse(&b, "two"),
        converse(&a, "three"),
        converse(&b, "four"),
    );

    // Either host reads what the other wrote, lists and searches it.
    for url in [&a, &b] {
        let (status, listed) = get_json(url, "/conversations?projectId=demo").await;
        assert_eq!(status, 200, "{listed}");
        let mut ids: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["id"].as_str())
            .collect();
        ids.sort_unstable();
        let mut expected = [one.as_str(), two.as_str(), three.as_str(), four.as_str()];
        expected.sort_unstable();
        assert_eq!(ids, expected);
        let (status, found) = get_json(url, "/conversations?projectId=demo&q=again%20three").await;
        assert_eq!(status, 200, "{found}");
        assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
        assert_eq!(found[0]["id"], three.as_str());
        let (status, messages) = get_json(url, &format!("/conversations/{two}")).await;
        assert_eq!(status, 200, "{messages}");
        assert_eq!(messages.as_array().unwrap().len(), 4);
    }
    // Each host follows the other's last run through the pooler (the shared run feeds).
    for (url, conversation) in [(&b, &one), (&a, &two)] {
        let path = format!("/conversations/{conversation}/events?after=0");
        let followed = Stream::read(get_at(url, &path).await).await;
        assert_eq!(followed.text(), "pooled answer");
        assert_eq!(
            followed.done(),
            (conversation.clone(), "completed".to_owned())
        );
    }
    for host in &hosts {
        let log = host.stderr.lock().unwrap().clone();
        assert!(!log.contains("prepared statement"), "{log}");
    }
}
