//! Project storage: the crate `rojos-project-storage` (its map is at its root), under the path the
//! host's modules name it by.

pub use rojos_project_storage::*;
