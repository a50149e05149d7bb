//! [`SearchSlots`]: at most one conversation search at a time per token, so one token cannot
//! queue searches in front of everyone else's (`docs/security.md`, "Conversation search").
//! A slot is held by the request's handler and freed when it ends or is dropped (its client
//! went away); the store stops the search's query then too.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The tokens with a search running.
#[derive(Debug, Default)]
pub struct SearchSlots {
    running: Mutex<HashSet<usize>>,
}

/// A token's search slot, freed when dropped.
#[derive(Debug)]
pub struct SearchSlot {
    slots: Arc<SearchSlots>,
    token: usize,
}

impl SearchSlots {
    /// The slot of `token` (its index in `[[auth.tokens]]`), or `None` while its previous
    /// search still runs.
    pub fn take(self: &Arc<Self>, token: usize) -> Option<SearchSlot> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.insert(token).then(|| SearchSlot {
            slots: Arc::clone(self),
            token,
        })
    }
}

impl Drop for SearchSlot {
    fn drop(&mut self) {
        self.slots
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_search_per_token_until_its_slot_is_dropped() {
        let slots = Arc::new(SearchSlots::default());
        let first = slots.take(0).expect("free");
        assert!(slots.take(0).is_none(), "token 0 already searches");
        let other = slots.take(1).expect("another token has its own slot");
        drop(first);
        assert!(slots.take(0).is_some());
        drop(other);
    }
}
