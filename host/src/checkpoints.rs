//! Undo of a run's file changes: the crate `rojos-checkpoints` (its map is at its root), and
//! its recordings as the plugin host runs them around a changing call ([`AroundCall`]).

pub use rojos_checkpoints::*;

use crate::plugins::AroundCall;

impl AroundCall for Recording {
    fn before(&mut self) -> Result<(), String> {
        Recording::before(self)
    }

    fn after(&mut self) {
        Recording::after(self)
    }
}

impl AroundCall for Sharing {
    fn before(&mut self) -> Result<(), String> {
        Sharing::before(self)
    }

    fn after(&mut self) {
        Sharing::after(self)
    }
}
