//! The checkpoints' recordings as the blocking work around a changing call: a run's
//! [`Recording`], and a [`Sharing`] of the project lock for a changing call outside a run.

use rojos_checkpoints::{Recording, Sharing};

use crate::call::AroundCall;

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
