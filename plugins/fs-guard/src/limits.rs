//! The longest path and name the file tools accept, read by the path checks (`path`) and
//! named in their messages (`error`).

/// Longest path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest single name accepted, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
