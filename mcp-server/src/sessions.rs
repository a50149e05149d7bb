//! The handshake sessions of `/mcp` and whose they are (`docs/mcp.md`, "Sessions"): a session
//! opens only under a free place (`[limits] max_mcp_sessions_per_token` per token,
//! `max_mcp_sessions` in all), is bound to the token that opened it, and gives its place back
//! when it ends (`DELETE`, or idle for `mcp_session_idle_secs`).
//!
//! A place is taken in two steps, so no session exists without one and no place outlives its
//! session: [`McpSessions::reserve`] before the `initialize` reaches the protocol, then
//! [`Reservation::bind`] once the session has its id (a reservation dropped unbound gives its
//! place back).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use rojos_metrics::Metrics;

/// `[limits]` keys bounding the sessions of `/mcp` (`docs/mcp.md`, "Sessions"), read by the
/// config (`rojos-config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSessionLimits {
    /// Sessions open at once, all tokens together (`503` beyond).
    pub max_sessions: usize,
    /// Sessions open at once per token (`429` beyond).
    pub max_sessions_per_token: usize,
    /// A session with no request for this long is ended.
    pub idle: Duration,
}

impl Default for McpSessionLimits {
    fn default() -> Self {
        McpSessionLimits {
            max_sessions: 512,
            max_sessions_per_token: 16,
            idle: Duration::from_secs(300),
        }
    }
}

/// Which limit refused a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionRefused {
    /// The token has `max_mcp_sessions_per_token` (the first number) sessions open; one
    /// ends after the second number of seconds unused.
    #[error(
        "this token is at its limit of {0} open MCP sessions ([limits] \
         max_mcp_sessions_per_token): end one with DELETE, or wait until one has gone unused \
         for {1} s"
    )]
    Token(usize, u64),
    /// The server has `max_mcp_sessions` sessions open.
    #[error(
        "the server is at its limit of {0} open MCP sessions ([limits] max_mcp_sessions); \
         try again later"
    )]
    Server(usize),
}

impl SessionRefused {
    /// The `limit` label of `rojos_requests_limited_total` for this refusal.
    pub fn label(self) -> &'static str {
        match self {
            SessionRefused::Token(..) => "mcp_sessions_per_token",
            SessionRefused::Server(_) => "mcp_sessions",
        }
    }
}

/// The open sessions: who owns each, and how many places are taken.
#[derive(Debug)]
pub struct McpSessions {
    limits: McpSessionLimits,
    state: Mutex<Places>,
    /// Where the number of places taken is shown (`rojos_mcp_sessions_open`).
    metrics: Arc<Metrics>,
}

#[derive(Debug, Default)]
struct Places {
    /// Each bound session's owner (the token's index in `[[auth.tokens]]`).
    owners: HashMap<Arc<str>, usize>,
    /// Places taken per token: bound sessions and reservations.
    per_token: HashMap<usize, usize>,
    /// Places taken in all.
    total: usize,
}

impl Places {
    fn give_back(&mut self, token: usize) {
        self.total = self.total.saturating_sub(1);
        if let Some(taken) = self.per_token.get_mut(&token) {
            *taken = taken.saturating_sub(1);
            if *taken == 0 {
                self.per_token.remove(&token);
            }
        }
    }
}

impl McpSessions {
    /// No session open yet; the places taken are shown in `metrics`.
    pub fn new(limits: McpSessionLimits, metrics: Arc<Metrics>) -> Arc<McpSessions> {
        Arc::new(McpSessions {
            limits,
            state: Mutex::new(Places::default()),
            metrics,
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> McpSessionLimits {
        self.limits
    }

    /// The idle time in whole seconds (rounded up): how long an abandoned session lasts at
    /// most after its last request.
    pub fn idle_secs(&self) -> u64 {
        self.limits.idle.as_secs() + u64::from(self.limits.idle.subsec_nanos() > 0)
    }

    fn places(&self) -> MutexGuard<'_, Places> {
        // The counts are updated in single statements: a panic elsewhere leaves them whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for one more session of `token`.
    ///
    /// # Errors
    ///
    /// [`SessionRefused`] when the token, or the server, has no place left.
    pub fn reserve(self: &Arc<Self>, token: usize) -> Result<Reservation, SessionRefused> {
        let mut places = self.places();
        let taken = places.per_token.get(&token).copied().unwrap_or(0);
        if taken >= self.limits.max_sessions_per_token {
            return Err(SessionRefused::Token(
                self.limits.max_sessions_per_token,
                self.idle_secs(),
            ));
        }
        if places.total >= self.limits.max_sessions {
            return Err(SessionRefused::Server(self.limits.max_sessions));
        }
        places.total += 1;
        *places.per_token.entry(token).or_default() += 1;
        self.metrics.mcp_sessions_open(places.total);
        Ok(Reservation {
            sessions: Arc::clone(self),
            token,
            bound: false,
        })
    }

    /// The token that opened session `id`; `None` for a session that is not open.
    pub fn owner(&self, id: &str) -> Option<usize> {
        self.places().owners.get(id).copied()
    }

    /// Session `id` has ended: its place is free. Nothing happens for an id not bound.
    pub fn release(&self, id: &str) {
        let mut places = self.places();
        if let Some(token) = places.owners.remove(id) {
            places.give_back(token);
            self.metrics.mcp_sessions_open(places.total);
        }
    }

    /// Places taken now (open sessions and sessions being opened).
    pub fn taken(&self) -> usize {
        self.places().total
    }
}

/// A place taken for a session being opened; given back when dropped unbound.
#[derive(Debug)]
pub struct Reservation {
    sessions: Arc<McpSessions>,
    token: usize,
    bound: bool,
}

impl Reservation {
    /// The session now has the id `id`: the place is its own until [`McpSessions::release`].
    pub fn bind(mut self, id: &Arc<str>) {
        let mut places = self.sessions.places();
        places.owners.insert(Arc::clone(id), self.token);
        self.bound = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.bound {
            let mut places = self.sessions.places();
            places.give_back(self.token);
            self.sessions.metrics.mcp_sessions_open(places.total);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sessions(per_token: usize, all: usize) -> Arc<McpSessions> {
        McpSessions::new(
            McpSessionLimits {
                max_sessions: all,
                max_sessions_per_token: per_token,
                idle: Duration::from_secs(60),
            },
            Arc::new(Metrics::new()),
        )
    }

    #[test]
    fn a_token_past_its_places_is_refused_while_another_is_admitted() {
        let sessions = sessions(2, 3);
        sessions.reserve(0).unwrap().bind(&Arc::from("a"));
        sessions.reserve(0).unwrap().bind(&Arc::from("b"));
        assert_eq!(
            sessions.reserve(0).unwrap_err(),
            SessionRefused::Token(2, 60)
        );
        sessions.reserve(1).unwrap().bind(&Arc::from("c"));
        assert_eq!(sessions.reserve(1).unwrap_err(), SessionRefused::Server(3));
        assert_eq!(
            (sessions.owner("a"), sessions.owner("c")),
            (Some(0), Some(1))
        );
        sessions.release("a");
        assert_eq!(sessions.owner("a"), None);
        sessions.reserve(0).unwrap().bind(&Arc::from("d"));
        assert_eq!(sessions.taken(), 3);
    }

    #[test]
    fn a_reservation_dropped_unbound_and_a_release_twice_give_one_place_back() {
        let sessions = sessions(1, 1);
        let reservation = sessions.reserve(0).unwrap();
        assert_eq!(sessions.reserve(1).unwrap_err(), SessionRefused::Server(1));
        drop(reservation);
        assert_eq!(sessions.taken(), 0);
        sessions.reserve(0).unwrap().bind(&Arc::from("a"));
        sessions.release("a");
        sessions.release("a");
        sessions.release("never");
        assert_eq!(sessions.taken(), 0);
    }
}
