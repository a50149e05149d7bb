//! [`PostgresSharedFeeds`]: run feeds (`crate::shared_feed`) as rows of `run_feeds` (one per
//! conversation) and `run_events` (one per published line), schema version 9. Each operation
//! is one statement, through the store's pool, so it works behind a transaction pooler; the
//! liveness time uses the database's clock only.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::failure::{client, query_failed, within};
use super::statements::{Run, Sql, StatementMode};
use crate::error::StoreError;
use crate::id::ConversationId;
use crate::shared_feed::{FeedRead, Published, SharedFeeds};

/// Replaces the conversation's feed with a new run's, deleting the old run's lines.
const OPEN: Sql = Sql {
    text: "WITH old AS (
         DELETE FROM run_events
         WHERE run IN (SELECT run FROM run_feeds WHERE conversation_id = $1)
     )
     INSERT INTO run_feeds (conversation_id, run, alive_until)
     VALUES ($1, $2, now() + $3::bigint * interval '1 millisecond')
     ON CONFLICT (conversation_id) DO UPDATE
         SET run = excluded.run, last_seq = 0, done = false, stop_asked = false,
             alive_until = excluded.alive_until, followed_at = NULL",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Adds lines after `$3` while the feed is still the run's; says whether a stop was asked
/// and when a follower last read.
const PUBLISH: Sql = Sql {
    text: "WITH feed AS (
         UPDATE run_feeds
         SET last_seq = greatest(last_seq, $3 + cardinality($4::text[])),
             done = done OR $5,
             alive_until = now() + $6::bigint * interval '1 millisecond'
         WHERE conversation_id = $1 AND run = $2
         RETURNING stop_asked,
             (extract(epoch FROM now() - followed_at) * 1000)::bigint AS followed_ms_ago
     ),
     added AS (
         INSERT INTO run_events (run, seq, line)
         SELECT $2, $3 + lines.ord, lines.line
         FROM unnest($4::text[]) WITH ORDINALITY AS lines (line, ord)
         WHERE EXISTS (SELECT 1 FROM feed)
         ON CONFLICT (run, seq) DO NOTHING
     )
     SELECT stop_asked, followed_ms_ago FROM feed",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TEXT_ARRAY,
        Type::BOOL,
        Type::INT8,
    ],
};

/// The feed's state and up to `$3` lines after `$2` (one row a line, or one row with no line),
/// noting that it is followed.
const READ: Sql = Sql {
    text: "WITH feed AS (
         UPDATE run_feeds SET followed_at = now() WHERE conversation_id = $1
         RETURNING run, last_seq, done, alive_until > now() AS alive
     )
     SELECT feed.run, feed.last_seq, feed.done, feed.alive, lines.seq, lines.line
     FROM feed LEFT JOIN LATERAL (
         SELECT seq, line FROM run_events
         WHERE run = feed.run AND seq > $2 ORDER BY seq LIMIT $3
     ) AS lines ON true
     ORDER BY lines.seq",
    types: &[Type::TEXT, Type::INT8, Type::INT8],
};

/// Flags the live run's feed for a stop.
const ASK_STOP: Sql = Sql {
    text: "UPDATE run_feeds SET stop_asked = true
     WHERE conversation_id = $1 AND NOT done AND alive_until > now()",
    types: &[Type::TEXT],
};

/// Deletes the run's feed and lines, if the feed is still the run's.
const CLOSE: Sql = Sql {
    text: "WITH gone AS (
         DELETE FROM run_feeds WHERE conversation_id = $1 AND run = $2 RETURNING run
     )
     DELETE FROM run_events WHERE run IN (SELECT run FROM gone)",
    types: &[Type::TEXT, Type::TEXT],
};

/// Run feeds in the PostgreSQL database of a [`PostgresStore`](crate::PostgresStore)
/// (see [`PostgresStore::shared_feeds`](crate::PostgresStore::shared_feeds)).
#[derive(Clone)]
pub struct PostgresSharedFeeds {
    pool: Pool,
    query_timeout: Duration,
    mode: StatementMode,
}

impl std::fmt::Debug for PostgresSharedFeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSharedFeeds")
            .finish_non_exhaustive()
    }
}

impl PostgresSharedFeeds {
    pub(super) fn new(pool: Pool, query_timeout: Duration, mode: StatementMode) -> Self {
        Self {
            pool,
            query_timeout,
            mode,
        }
    }
}

#[async_trait]
impl SharedFeeds for PostgresSharedFeeds {
    async fn open(
        &self,
        conversation: &ConversationId,
        run: &str,
        alive_for: Duration,
    ) -> Result<(), StoreError> {
        let action = || format!("open the run feed of conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(
                    self.mode,
                    &OPEN,
                    &[&conversation.as_str(), &run, &millis(alive_for)],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(())
    }

    async fn publish(
        &self,
        conversation: &ConversationId,
        run: &str,
        after: u64,
        lines: &[&str],
        done: bool,
        alive_for: Duration,
    ) -> Result<Option<Published>, StoreError> {
        let action = || format!("publish the run feed of conversation '{conversation}'");
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let row = within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .opt(
                    self.mode,
                    &PUBLISH,
                    &[
                        &conversation.as_str(),
                        &run,
                        &after,
                        &lines,
                        &done,
                        &millis(alive_for),
                    ],
                )
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(row.map(|row| Published {
            stop_asked: row.get(0),
            followed_ago: row
                .get::<_, Option<i64>>(1)
                .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        }))
    }

    async fn read(
        &self,
        conversation: &ConversationId,
        after: u64,
        max: usize,
    ) -> Result<Option<FeedRead>, StoreError> {
        let action = || format!("read the run feed of conversation '{conversation}'");
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .rows(self.mode, &READ, &[&conversation.as_str(), &after, &max])
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let number = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(Some(FeedRead {
            run: first.get(0),
            last_seq: number(first.get(1)),
            done: first.get(2),
            alive: first.get(3),
            lines: rows
                .iter()
                .filter_map(|row| {
                    let seq: Option<i64> = row.get(4);
                    let line: Option<String> = row.get(5);
                    Some((number(seq?), line?))
                })
                .collect(),
        }))
    }

    async fn ask_stop(&self, conversation: &ConversationId) -> Result<bool, StoreError> {
        let action = || format!("ask the run of conversation '{conversation}' to stop");
        let asked = within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(self.mode, &ASK_STOP, &[&conversation.as_str()])
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(asked == 1)
    }

    async fn close(&self, conversation: &ConversationId, run: &str) -> Result<(), StoreError> {
        let action = || format!("close the run feed of conversation '{conversation}'");
        within(self.query_timeout, action, async {
            let client = client(&self.pool, action()).await?;
            client
                .count(self.mode, &CLOSE, &[&conversation.as_str(), &run])
                .await
                .map_err(|e| query_failed(action(), e))
        })
        .await?;
        Ok(())
    }
}

/// A time in whole milliseconds, as the statements take it.
fn millis(time: Duration) -> i64 {
    i64::try_from(time.as_millis()).unwrap_or(i64::MAX)
}
