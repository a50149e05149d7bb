//! A model turn on its way: its request, sent ([`Sent`]); how it ended ([`Answered`],
//! [`TurnEnd`]); its events held back or passed on ([`TurnOut`]).

use std::time::Instant;

use rojos_conversations::StoreError;
use rojos_llm::{Turn, TurnEvent, TurnStream};

use super::out::Out;
use crate::Event;

/// A model turn's request, sent: its stream, the stream's first item when it came while
/// something else was awaited, and when it was sent.
pub(super) struct Sent {
    /// The stream writes each attempt's body from the run's history and the tools' shared
    /// definitions, and keeps no body between attempts: no copy of either is made or held
    /// for a turn. It shares the history until the turn ends, before the history grows.
    pub(super) stream: TurnStream,
    /// `Some(None)`: the client went away or the server shuts down ([`next_or_cancelled`](super::out::next_or_cancelled)).
    pub(super) ahead: Option<Option<Option<Result<TurnEvent, rojos_llm::LlmError>>>>,
    pub(super) started: Instant,
}

impl Sent {
    /// A request sent now.
    pub(super) fn now(stream: TurnStream) -> Sent {
        Sent {
            stream,
            ahead: None,
            started: Instant::now(),
        }
    }

    /// The run's first turn, sent at `started`, before the run ([`FirstTurn`](crate::FirstTurn)).
    pub(super) fn before_the_run(
        stream: TurnStream,
        ahead: Option<Option<Result<TurnEvent, rojos_llm::LlmError>>>,
        started: Instant,
    ) -> Sent {
        Sent {
            stream,
            ahead: ahead.map(Some),
            started,
        }
    }
}

/// How a model turn ended without a result.
pub(super) enum TurnEnd {
    Cancelled {
        partial: String,
    },
    Failed {
        message: String,
        partial: String,
        /// The provider said the request is over the model's context window.
        overflow: bool,
    },
    /// The step stored alongside the turn's request could not be stored.
    Unsaved(StoreError),
}

/// A model turn that ended with its result.
pub(super) struct Answered {
    pub(super) turn: Turn,
    /// What became of its events.
    pub(super) out: TurnOut,
}

/// A model turn's events on their way to the client: passed on as they come, or held back
/// until the turn is known whole ([`super::Run::model_turn`]).
pub(super) struct TurnOut {
    pub(super) hold: bool,
    pub(super) held: Vec<Event>,
    /// Some of its text reached the client.
    pub(super) shown_text: bool,
}

impl TurnOut {
    pub(super) async fn pass(&mut self, out: &Out, event: Event) {
        if self.hold {
            self.held.push(event);
        } else {
            self.shown_text |= matches!(event, Event::Chat { .. });
            out.send(event).await;
        }
    }

    /// Passes on what was held.
    pub(super) async fn release(self, out: &Out) {
        for event in self.held {
            out.send(event).await;
        }
    }
}
