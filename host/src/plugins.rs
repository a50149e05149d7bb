//! Tool plugins: the crate `rojos-plugin-host` (its map is at its root): trust, loading, the
//! drop-in folder, and one call in the server's process or in a sandboxed worker.

pub use rojos_plugin_host::*;
