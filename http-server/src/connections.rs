//! The server's open connections: how many there are, which are in a request, when each must
//! close, and which one makes room at `max_connections`. Pure bookkeeping under one mutex, O(log n)
//! per event; the accept loop and the connection tasks (the crate's root) act on its answers.
//!
//! A connection is *in a request* from the moment its request head is complete (the service is
//! called) until its response body is dropped. Otherwise it is *waiting*: for its first request
//! head, for the rest of a head it started, or idle between keep-alive requests. Only waiting
//! connections are ever evicted, the one that has waited longest first.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::{sync::Notify, time::Instant};

use crate::limits::HttpLimits;

/// Why the server closed a connection (the `reason` label of `rojos_connections_closed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A request head was not complete within `header_read_timeout`.
    HeaderTimeout,
    /// No new request within `idle_timeout` of the last response.
    Idle,
    /// Closed at `max_connections` to make room for a new connection.
    Evicted,
    /// The client read none of its response for `stream_write_timeout`.
    WriteTimeout,
    /// Refused at `max_connections`: every open connection was in a request.
    Refused,
}

impl CloseReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::Idle => "idle",
            CloseReason::Evicted => "evicted",
            CloseReason::WriteTimeout => "write_timeout",
            CloseReason::Refused => "refused",
        }
    }
}

/// What a connection's task should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Close it now.
    Close(CloseReason),
    /// Close it at this instant unless something changes first.
    CloseAt(Instant),
    /// A request is in progress: no deadline.
    Serve,
}

/// Every open connection.
#[derive(Debug)]
pub(super) struct Connections {
    limits: HttpLimits,
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    /// Connections counted against `max_connections`.
    open: usize,
    /// The waiting connections, by the order in which they started waiting.
    waiting: BTreeMap<u64, Arc<Connection>>,
    next_key: u64,
}

impl Registry {
    fn start_waiting(&mut self, connection: &Arc<Connection>, state: &mut State) {
        let key = self.next_key;
        self.next_key += 1;
        self.waiting.insert(key, Arc::clone(connection));
        state.waiting_key = Some(key);
    }

    fn stop_waiting(&mut self, state: &mut State) {
        if let Some(key) = state.waiting_key.take() {
            self.waiting.remove(&key);
        }
    }
}

/// One open connection, shared by its task, its service and its IO.
#[derive(Debug)]
pub(super) struct Connection {
    state: Mutex<State>,
    /// Woken when the connection's deadline may have changed or it must close.
    changed: Notify,
}

#[derive(Debug)]
struct State {
    /// Requests whose head is complete and whose response body is not yet dropped.
    requests: usize,
    /// When the connection last had no request in progress (opened, or a response ended).
    waiting_since: Instant,
    /// When the head now being read began: the opening for the first request, the first byte
    /// read while idle for later ones.
    head_started: Option<Instant>,
    /// Its key in `Registry::waiting` while it waits.
    waiting_key: Option<u64>,
    /// Set when the server has decided to close it.
    closing: Option<CloseReason>,
    /// Whether it still counts against `max_connections` (an evicted one gave its place away).
    counted: bool,
}

impl Connection {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is plain data, valid after any panic: a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resolves when [`Connections::next`]'s answer may have changed.
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Bytes arrived. While waiting idle, they start the next request head, which must then be
    /// complete within `header_read_timeout`.
    pub(super) fn bytes_read(&self) {
        let mut state = self.lock();
        if state.requests == 0 && state.head_started.is_none() {
            state.head_started = Some(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }

    /// The server closes it for `reason` (the first reason given wins).
    pub(super) fn close(&self, reason: CloseReason) {
        self.lock().closing.get_or_insert(reason);
        self.changed.notify_one();
    }

    /// Why the server closed it, if it did.
    pub(super) fn closing(&self) -> Option<CloseReason> {
        self.lock().closing
    }
}

impl Connections {
    pub(super) fn new(limits: HttpLimits) -> Connections {
        Connections {
            limits,
            registry: Mutex::default(),
        }
    }

    /// The `max_connections` limit.
    pub(super) fn max(&self) -> usize {
        self.limits.max_connections
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // Plain counters and a map, consistent between statements: usable after a panic.
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a newly accepted connection. At the limit, the connection that has waited longest
    /// is told to close and gives its place; `None` when every connection is in a request.
    pub(super) fn admit(&self) -> Option<Arc<Connection>> {
        let mut registry = self.registry();
        if registry.open >= self.limits.max_connections {
            let (_, evicted) = registry.waiting.pop_first()?;
            let mut state = evicted.lock();
            state.waiting_key = None;
            state.counted = false;
            state.closing.get_or_insert(CloseReason::Evicted);
            drop(state);
            evicted.changed.notify_one();
            registry.open -= 1;
        }
        let now = Instant::now();
        let connection = Arc::new(Connection {
            state: Mutex::new(State {
                requests: 0,
                waiting_since: now,
                head_started: Some(now),
                waiting_key: None,
                closing: None,
                counted: true,
            }),
            changed: Notify::new(),
        });
        registry.open += 1;
        registry.start_waiting(&connection, &mut connection.lock());
        Some(connection)
    }

    /// A request head is complete; the connection is not evictable until the guard drops.
    pub(super) fn begin_request(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
    ) -> RequestInProgress {
        let mut registry = self.registry();
        let mut state = connection.lock();
        registry.stop_waiting(&mut state);
        state.requests += 1;
        state.head_started = None;
        drop(state);
        connection.changed.notify_one();
        RequestInProgress {
            connections: Arc::clone(self),
            connection: Arc::clone(connection),
        }
    }

    fn end_request(&self, connection: &Arc<Connection>) {
        let mut registry = self.registry();
        let mut state = connection.lock();
        state.requests -= 1;
        if state.requests == 0 {
            state.waiting_since = Instant::now();
            if state.counted {
                registry.start_waiting(connection, &mut state);
            }
        }
        drop(state);
        connection.changed.notify_one();
    }

    /// The connection is closed: its place is free.
    pub(super) fn release(&self, connection: &Connection) {
        let mut registry = self.registry();
        let mut state = connection.lock();
        registry.stop_waiting(&mut state);
        if std::mem::replace(&mut state.counted, false) {
            registry.open -= 1;
        }
    }

    /// What the connection's task should do now. A decision to close wins over a request
    /// that began after it (an eviction racing a request head completing).
    pub(super) fn next(&self, connection: &Connection) -> Next {
        let state = connection.lock();
        if let Some(reason) = state.closing {
            return Next::Close(reason);
        }
        if state.requests > 0 {
            return Next::Serve;
        }
        let (deadline, reason) = match state.head_started {
            Some(started) => (
                started + self.limits.header_read_timeout,
                CloseReason::HeaderTimeout,
            ),
            None => (
                state.waiting_since + self.limits.idle_timeout,
                CloseReason::Idle,
            ),
        };
        if deadline <= Instant::now() {
            Next::Close(reason)
        } else {
            Next::CloseAt(deadline)
        }
    }
}

/// A request in progress on a connection; dropping it (with the response body) ends it.
#[derive(Debug)]
pub(super) struct RequestInProgress {
    connections: Arc<Connections>,
    connection: Arc<Connection>,
}

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.connections.end_request(&self.connection);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn connections(max: usize) -> Arc<Connections> {
        Arc::new(Connections::new(HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: max,
            stream_write_timeout: Duration::from_secs(30),
        }))
    }

    fn deadline(connections: &Connections, connection: &Connection) -> Duration {
        match connections.next(connection) {
            Next::CloseAt(at) => at - Instant::now(),
            other => panic!("expected a deadline, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_limit_the_connection_waiting_longest_is_evicted() {
        let connections = connections(3);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        let third = connections.admit().unwrap();
        // The first finishes a request: it now waits for its next one, after the others.
        drop(connections.begin_request(&first));
        let fourth = connections.admit().unwrap();
        assert_eq!(connections.next(&second), Next::Close(CloseReason::Evicted));
        assert!(matches!(connections.next(&third), Next::CloseAt(_)));
        let _fifth = connections.admit().unwrap();
        assert_eq!(connections.next(&third), Next::Close(CloseReason::Evicted));
        let _sixth = connections.admit().unwrap();
        assert_eq!(connections.next(&first), Next::Close(CloseReason::Evicted));
        assert!(matches!(connections.next(&fourth), Next::CloseAt(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_connection_is_in_a_request_a_new_one_is_refused() {
        let connections = connections(2);
        let a = connections.admit().unwrap();
        let b = connections.admit().unwrap();
        let in_a = connections.begin_request(&a);
        let _in_b = connections.begin_request(&b);
        assert!(connections.admit().is_none());
        assert_eq!(connections.next(&a), Next::Serve);
        drop(in_a);
        assert!(connections.admit().is_some(), "a is idle again: evicted");
        assert_eq!(connections.next(&a), Next::Close(CloseReason::Evicted));
        // Released connections free their place.
        connections.release(&a);
        connections.release(&b);
        assert!(connections.admit().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_must_be_complete_in_time_and_an_idle_connection_closes() {
        let connections = connections(16);
        let connection = connections.admit().unwrap();
        assert_eq!(deadline(&connections, &connection), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        connection.bytes_read();
        assert_eq!(
            deadline(&connections, &connection),
            Duration::from_secs(6),
            "the first head is timed from the opening"
        );
        let request = connections.begin_request(&connection);
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(connections.next(&connection), Next::Serve);
        drop(request);
        assert_eq!(
            deadline(&connections, &connection),
            Duration::from_secs(60),
            "idle"
        );
        tokio::time::advance(Duration::from_secs(50)).await;
        connection.bytes_read();
        assert_eq!(
            deadline(&connections, &connection),
            Duration::from_secs(10),
            "a started head has the header timeout"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            connections.next(&connection),
            Next::Close(CloseReason::HeaderTimeout)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_closes_after_the_idle_timeout() {
        let connections = connections(16);
        let connection = connections.admit().unwrap();
        drop(connections.begin_request(&connection));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            connections.next(&connection),
            Next::Close(CloseReason::Idle)
        );
    }
}
