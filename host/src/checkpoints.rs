//! Undo of a run's file changes: the crate `rojos-checkpoints` (its map is at its root). The
//! plugin host runs its recordings around a changing call (`rojos-plugin-host`).

pub use rojos_checkpoints::*;
