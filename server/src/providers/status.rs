//! [`StatusBoard`]: what the checks found about each provider (checking, ready with its model,
//! or unavailable with the fix), kept per provider configuration so an edit of `rojos.toml`
//! starts that provider over. It logs a provider's status when it is first known and when it
//! changes, and each rojo's provider when that changes. Choosing a provider, and logging each rojo's
//! choice, is `choice.rs`'s job; running the checks `monitor.rs`'s.

use std::{
    collections::BTreeMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use rojos_llm::Client;
use tokio::sync::watch;

pub use super::check::Status;
use super::{advice, check::Checked};
use crate::live::LiveProvider;

/// How often a provider is checked again: ready ones every two minutes, others every fifteen
/// seconds, so a server started later is picked up soon (docs/configuration.md).
pub fn recheck_after(status: &Status) -> Duration {
    match status {
        Status::Ready { .. } => Duration::from_secs(120),
        Status::Checking | Status::Unavailable { .. } => Duration::from_secs(15),
    }
}

/// What the checks found, per provider name.
#[derive(Debug)]
pub struct StatusBoard {
    state: Mutex<BoardState>,
    /// Marked at every recorded check, for those waiting for a status.
    changed: watch::Sender<()>,
}

#[derive(Debug, Default)]
struct BoardState {
    entries: BTreeMap<String, Entry>,
    /// The last line logged for each rojo's choice.
    rojo_lines: BTreeMap<String, String>,
}

/// One provider configuration's status.
#[derive(Debug)]
struct Entry {
    fingerprint: u64,
    status: Status,
    /// The client for the model taken from the provider's list.
    client: Option<Client>,
    /// When the last check started or ended.
    checked_at: Option<Instant>,
    in_flight: bool,
}

impl Entry {
    fn new(fingerprint: u64) -> Entry {
        Entry {
            fingerprint,
            status: Status::Checking,
            client: None,
            checked_at: None,
            in_flight: false,
        }
    }
}

/// A provider's status and the client to use it with, as the board has them now.
#[derive(Debug, Clone)]
pub struct Known {
    /// Its status.
    pub status: Status,
    /// For a model taken from the provider's list, the client for that model.
    pub client: Option<Client>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard {
            state: Mutex::default(),
            changed: watch::Sender::new(()),
        }
    }
}

impl StatusBoard {
    /// What is known of provider `name` as configured now. A missing key is known without a
    /// check.
    pub fn known(&self, name: &str, provider: &LiveProvider) -> Known {
        if provider.config.missing_key {
            let reference = super::named_live(name, provider);
            return Known {
                status: Status::Unavailable {
                    fix: advice::missing_key(&reference),
                },
                client: None,
            };
        }
        let fingerprint = provider.fingerprint();
        let state = self.lock();
        match state.entries.get(name) {
            Some(entry) if entry.fingerprint == fingerprint => Known {
                status: entry.status.clone(),
                client: entry.client.clone(),
            },
            _ => Known {
                status: Status::Checking,
                client: None,
            },
        }
    }

    /// When provider `name` is next due for a check; `None` while one is running.
    pub fn due(&self, name: &str, provider: &LiveProvider) -> Option<Instant> {
        let fingerprint = provider.fingerprint();
        let state = self.lock();
        match state.entries.get(name) {
            Some(entry) if entry.fingerprint == fingerprint => {
                if entry.in_flight {
                    return None;
                }
                Some(
                    entry
                        .checked_at
                        .map_or_else(Instant::now, |at| at + recheck_after(&entry.status)),
                )
            }
            _ => Some(Instant::now()),
        }
    }

    /// Claims a check of provider `name`: `false` while one is running or when the last one
    /// was less than `min_gap` ago.
    pub fn begin(&self, name: &str, provider: &LiveProvider, min_gap: Duration) -> bool {
        let fingerprint = provider.fingerprint();
        let mut state = self.lock();
        let entry = state
            .entries
            .entry(name.to_owned())
            .or_insert_with(|| Entry::new(fingerprint));
        if entry.fingerprint != fingerprint {
            *entry = Entry::new(fingerprint);
        }
        if entry.in_flight || entry.checked_at.is_some_and(|at| at.elapsed() < min_gap) {
            return false;
        }
        entry.in_flight = true;
        entry.checked_at = Some(Instant::now());
        true
    }

    /// Records a check of provider `name` claimed with [`begin`](Self::begin), logs the
    /// provider's status when it changed, and wakes the waiters; `false` when the check was
    /// dropped because the provider's configuration changed meanwhile. The whole step, with
    /// each rojo's choice logged, is `StatusBoard::record` (`choice.rs`).
    pub(super) fn record_check(
        &self,
        name: &str,
        provider: &LiveProvider,
        checked: Checked,
    ) -> bool {
        let fingerprint = provider.fingerprint();
        {
            let mut state = self.lock();
            let Some(entry) = state.entries.get_mut(name) else {
                return false;
            };
            if entry.fingerprint != fingerprint {
                return false;
            }
            entry.in_flight = false;
            entry.checked_at = Some(Instant::now());
            if entry.status != checked.status {
                log_provider(name, &checked);
            }
            entry.status = checked.status;
            entry.client = checked.client;
        }
        self.changed.send_replace(());
        true
    }

    /// A receiver told of every recorded check.
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    /// Keeps `line` as the last logged choice of rojo `name`: `false` when it was that already.
    pub(super) fn note_rojo_line(&self, name: &str, line: &str) -> bool {
        let mut state = self.lock();
        if state.rojo_lines.get(name).map(String::as_str) == Some(line) {
            return false;
        }
        state.rojo_lines.insert(name.to_owned(), line.to_owned());
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BoardState> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn log_provider(name: &str, checked: &Checked) {
    match (&checked.status, &checked.detail) {
        (Status::Ready { model }, _) => {
            tracing::info!(provider = %name, model = %model, "provider {name} is ready (model {model})")
        }
        (Status::Unavailable { fix }, Some(detail)) => {
            tracing::warn!(provider = %name, detail = %detail, "provider {name} is unavailable: {fix}")
        }
        (Status::Unavailable { fix }, None) => {
            tracing::warn!(provider = %name, "provider {name} is unavailable: {fix}")
        }
        (Status::Checking, _) => {}
    }
}
