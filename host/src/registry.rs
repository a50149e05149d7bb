//! The tool registry: the agent's (`rojos_agent::registry`), under the path the host's modules
//! name it by.

pub use rojos_agent::registry::*;
