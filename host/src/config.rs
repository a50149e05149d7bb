//! `rojos.toml`: the crate `rojos-config` (its map is at its root), under the path the host's
//! modules name it by.

pub use rojos_config::*;
