//! The list of valid names an "unknown name" message shows: `rojos_config::names`.

pub use rojos_config::names::*;
