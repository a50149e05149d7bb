//! Publishing a run's feed (`feed`) to a store several hosts share
//! (`rojos_conversations::SharedFeeds`), so that a client on any host follows the run and
//! can stop it (`docs/deploy.md`, "Several hosts"). The run never waits for it: its events go
//! to the feed in memory as on one host, and this task, woken by them, publishes whatever
//! waits in one statement, at most every [`GAP`], and at least every [`TICK`] (the feed's
//! liveness, and the moment a stop asked elsewhere is read). A stop asked on another host
//! stops the run as one asked here; a client following on another host counts as following.

use std::{sync::Arc, time::Duration};

use rojos_conversations::{ConversationId, SharedFeeds};

use super::{
    feed::{Feed, KEPT_AFTER_DONE},
    StopCause,
};

/// The shortest time between two publishes of one run: events made meanwhile go together.
const GAP: Duration = Duration::from_millis(50);

/// The longest time between two publishes (while no event comes).
pub(super) const TICK: Duration = Duration::from_millis(250);

/// Starts `feed`'s shared feed (replacing the conversation's previous run's); `false`, with
/// a warning logged, when the store cannot be reached ([`publish`] tries again).
pub(super) async fn open(
    shared: &dyn SharedFeeds,
    conversation: &ConversationId,
    feed: &Feed,
    alive_for: Duration,
) -> bool {
    match shared.open(conversation, feed.run(), alive_for).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cannot open the run's shared feed");
            false
        }
    }
}

/// Publishes `feed` of a run of `conversation` until its `DONE` is published; the feed stays
/// alive for `alive_for` after each publish (a follower elsewhere reports the run lost once
/// that passed). Gives up when a newer run replaced the feed. While the store cannot be
/// reached it tries again every [`TICK`], until the run ended and its kept time
/// ([`KEPT_AFTER_DONE`]) passed. A server shutting down waits for it, within its grace
/// (`rojos::serve`): the run's last events reach followers on other hosts.
/// `opened` says whether [`open`] succeeded already.
pub(super) async fn publish(
    shared: Arc<dyn SharedFeeds>,
    conversation: ConversationId,
    feed: Arc<Feed>,
    alive_for: Duration,
    mut opened: bool,
) {
    let mut published = 0u64;
    // Publishes failed in a row since the run ended: past its kept time, it gives up.
    let mut failed_after_done = 0u32;
    loop {
        if !opened {
            opened = open(shared.as_ref(), &conversation, &feed, alive_for).await;
        }
        if !opened && feed.is_done() {
            failed_after_done += 1;
        }
        if opened {
            let (lines, done) = feed.lines_after(published);
            let texts: Vec<&str> = lines.iter().map(|line| line.trim_end()).collect();
            match shared
                .publish(
                    &conversation,
                    feed.run(),
                    published,
                    &texts,
                    done,
                    alive_for,
                )
                .await
            {
                Ok(Some(news)) => {
                    published += texts.len() as u64;
                    if done {
                        return;
                    }
                    if news.stop_asked && feed.stop(StopCause::Asked) {
                        tracing::info!("stop asked through another host");
                    }
                    if let Some(ago) = news.followed_ago {
                        feed.followed_elsewhere(ago);
                    }
                }
                Ok(None) => {
                    tracing::warn!("a newer run replaced this run's shared feed");
                    return;
                }
                Err(e) => {
                    if done {
                        failed_after_done += 1;
                    }
                    tracing::warn!(error = %e, "cannot publish the run's events");
                }
            }
        }
        if failed_after_done >= KEPT_AFTER_DONE.as_millis() as u32 / TICK.as_millis() as u32 {
            tracing::warn!("the ended run's events could not be published: giving up");
            return;
        }
        tokio::time::sleep(GAP).await;
        tokio::select! {
            () = feed.pushed() => {}
            () = tokio::time::sleep(TICK - GAP) => {}
        }
    }
}
