//! [`Windows`]: what each provider said of each model's window, asked once (a local
//! server's at every lookup: it may have loaded the model again since), shared by concurrent
//! lookups, never awaited past [`ASK_LIMIT`]: a slower answer is kept for later lookups, a
//! failure is logged once and asked again after [`RETRY_AFTER`].

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rojos_llm::Client;
use tokio::sync::watch;

use super::{
    ask,
    reported::{Reported, ASK_LIMIT},
};
use crate::providers::ProviderRef;

/// How long a failed question is not asked again.
const RETRY_AFTER: Duration = Duration::from_secs(300);

/// Provider name, base URL and model.
type Key = (String, String, String);

/// What is known of one provider's model.
#[derive(Debug, Default)]
struct Slot {
    /// The last answer, and when it came.
    known: Option<(Option<Reported>, Instant)>,
    /// The last question failed.
    failed: bool,
    /// The question in flight, if any: `true` once answered.
    asking: Option<watch::Receiver<bool>>,
}

/// The windows the providers told, by provider and model.
#[derive(Debug, Default)]
pub struct Windows {
    slots: Mutex<HashMap<Key, Slot>>,
}

impl Windows {
    /// The window `provider` says its model has, asking it if due (`fresh`: even when an
    /// answer is kept, as after it cut a request); `None` when it cannot tell.
    pub async fn lookup(
        self: &Arc<Self>,
        provider: &ProviderRef,
        client: &Client,
        fresh: bool,
    ) -> Option<Reported> {
        let key = (
            provider.name.clone(),
            client.provider().base_url.clone(),
            client.provider().model.clone(),
        );
        let local = provider.kind.is_some_and(|k| k.is_local());
        let mut asking = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let slot = slots.entry(key.clone()).or_default();
            match (&slot.asking, &slot.known) {
                (Some(asking), _) => asking.clone(),
                // Kept: a recent failure is not asked again, a hosted list not at all.
                (None, Some((known, at)))
                    if (slot.failed && at.elapsed() < RETRY_AFTER)
                        || (!slot.failed && !fresh && !local) =>
                {
                    return known.clone()
                }
                _ => {
                    let (done, asking) = watch::channel(false);
                    slot.asking = Some(asking.clone());
                    self.spawn_ask(key.clone(), provider.clone(), client.clone(), done);
                    asking
                }
            }
        };
        let answered = tokio::time::timeout(ASK_LIMIT, asking.wait_for(|done| *done)).await;
        if answered.is_err() {
            tracing::debug!(provider = %provider.name, "the provider's window is not known yet");
        }
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(&key).and_then(|s| s.known.as_ref()?.0.clone())
    }

    /// What `provider` last said of its model's window, without asking.
    pub fn known(&self, provider: &ProviderRef, client: &Client) -> Option<Reported> {
        let key = (
            provider.name.clone(),
            client.provider().base_url.clone(),
            client.provider().model.clone(),
        );
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(&key).and_then(|s| s.known.as_ref()?.0.clone())
    }

    /// Asks in a task of its own, so a slow answer is still kept when no lookup waits.
    fn spawn_ask(
        self: &Arc<Self>,
        key: Key,
        provider: ProviderRef,
        client: Client,
        done: watch::Sender<bool>,
    ) {
        let windows = Arc::clone(self);
        tokio::spawn(async move {
            let answer = ask(&client, provider.kind).await;
            let mut slots = windows.slots.lock().unwrap_or_else(|e| e.into_inner());
            let slot = slots.entry(key).or_default();
            slot.asking = None;
            match answer {
                Ok(reported) => {
                    if let Some(r) = &reported {
                        tracing::debug!(provider = %provider.name, model = %provider.model, context_tokens = r.tokens, from = %r.how, "the provider told its model's window");
                    }
                    slot.known = Some((reported, Instant::now()));
                    slot.failed = false;
                }
                Err(e) => {
                    if !slot.failed {
                        tracing::warn!(
                            provider = %provider.name,
                            error = %crate::error_chain::error_chain(&e),
                            "the provider did not say its model's context window; the table of \
                             well-known models or the default applies (set `context_tokens` to \
                             give it)"
                        );
                    }
                    // What was known before stays known.
                    let known = slot.known.take().and_then(|(known, _)| known);
                    slot.known = Some((known, Instant::now()));
                    slot.failed = true;
                }
            }
            drop(slots);
            let _ = done.send(true);
        });
    }
}
