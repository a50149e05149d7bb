//! Shared run feeds (`PostgresSharedFeeds`): what one host publishes of its run, another
//! host sharing the database reads from any line on, in order, once; a stop asked from the
//! other host reaches the publisher; a feed whose publisher stopped refreshing it reads as
//! not alive; a newer run replaces the feed; deleting the conversation deletes it. With
//! prepared and with unnamed statements (a transaction pooler).

use std::time::Duration;

use rojos_conversations::{ConversationStore, PostgresStore, SharedFeeds, StatementMode};

use crate::support::{cluster, pg_options};

const ALIVE: Duration = Duration::from_secs(30);

async fn two_hosts_share_a_feed(mode: StatementMode) {
    let database = cluster().create_database().unwrap();
    let mut options = pg_options(&database);
    options.statements = mode;
    let host_a = PostgresStore::connect(&options).await.unwrap();
    let host_b = PostgresStore::open(&options).unwrap();
    let (a, b) = (host_a.shared_feeds(), host_b.shared_feeds());
    let id = host_a.create("demo", "default").await.unwrap();
    assert_eq!(b.read(&id, 0, 10).await.unwrap(), None, "no run yet");

    a.open(&id, "run1", ALIVE).await.unwrap();
    let news = a
        .publish(
            &id,
            "run1",
            0,
            &["{\"seq\":1}", "{\"seq\":2}"],
            false,
            ALIVE,
        )
        .await
        .unwrap()
        .expect("the feed is run1's");
    assert!(!news.stop_asked);
    assert_eq!(news.followed_ago, None, "nobody followed yet");
    // Published again (a retried statement): nothing twice.
    a.publish(&id, "run1", 0, &["{\"seq\":1}"], false, ALIVE)
        .await
        .unwrap();
    a.publish(&id, "run1", 2, &["{\"seq\":3}"], false, ALIVE)
        .await
        .unwrap();

    let read = b.read(&id, 1, 10).await.unwrap().unwrap();
    assert_eq!(read.run, "run1");
    assert_eq!((read.last_seq, read.done, read.alive), (3, false, true));
    let lines: Vec<u64> = read.lines.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(lines, [2, 3]);
    assert_eq!(read.lines[1].1, "{\"seq\":3}");
    assert_eq!(b.read(&id, 0, 1).await.unwrap().unwrap().lines.len(), 1);

    assert!(b.ask_stop(&id).await.unwrap(), "a live run can be stopped");
    let news = a
        .publish(&id, "run1", 3, &["{\"seq\":4}"], true, ALIVE)
        .await
        .unwrap()
        .unwrap();
    assert!(news.stop_asked, "the stop reached the running host");
    assert!(news.followed_ago.is_some(), "B's reads count as following");
    let read = b.read(&id, 3, 10).await.unwrap().unwrap();
    assert_eq!((read.last_seq, read.done), (4, true));
    assert!(
        !b.ask_stop(&id).await.unwrap(),
        "an ended run cannot be stopped"
    );

    // A newer run replaces the feed: the old run can no longer publish.
    b.open(&id, "run2", Duration::from_millis(1)).await.unwrap();
    assert_eq!(
        a.publish(&id, "run1", 4, &["{}"], false, ALIVE)
            .await
            .unwrap(),
        None
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let read = a.read(&id, 0, 10).await.unwrap().unwrap();
    assert_eq!((read.run.as_str(), read.last_seq), ("run2", 0));
    assert!(read.lines.is_empty(), "run1's lines went with it");
    assert!(!read.alive, "run2's publisher never refreshed it");
    assert!(
        !a.ask_stop(&id).await.unwrap(),
        "a dead run cannot be stopped"
    );

    a.close(&id, "run1").await.unwrap();
    assert!(a.read(&id, 0, 10).await.unwrap().is_some(), "run2's stays");
    assert!(host_b.delete(&id).await.unwrap());
    assert_eq!(a.read(&id, 0, 10).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_share_a_feed_with_prepared_statements() {
    two_hosts_share_a_feed(StatementMode::Prepared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_share_a_feed_with_unnamed_statements() {
    two_hosts_share_a_feed(StatementMode::Unnamed).await;
}
