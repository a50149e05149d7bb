//! Confined file access under a project root, shared by every file tool.
//!
//! A tool gets the project root as an open folder descriptor in its
//! [`CallContext`](rojos_plugin_api::CallContext); [`ProjectDir::from_context`] turns it into a
//! `cap-std` capability, and every operation resolves the model's relative path beneath it in
//! the kernel (`openat2` with `RESOLVE_BENEATH`), so `..`, absolute paths and symlinks that
//! lead out are refused at the moment of use, with no check-then-act race. See
//! docs/security.md ("Tools cannot leave the project") and docs/tools.md for the threat model.
//!
//! # Layout
//!
//! - [`args`]: [`parse_args`], the model's arguments as a JSON object only.
//! - [`limits`]: the longest path and name accepted ([`MAX_PATH_BYTES`], [`MAX_NAME_BYTES`]).
//! - [`path`]: syntactic checks on the model's path string ([`check_path`]).
//! - [`names`]: which characters of a name are invisible ([`is_invisible`]: refused in new
//!   names) and how every output shows them escaped ([`escaped`], [`json_escaped`]).
//! - [`error`]: [`PathError`], the messages the model reads, and [`from_io`], the one mapping
//!   from `io::Error`/errno.
//! - [`project`]: [`ProjectDir`] and its operations, in two halves: reading
//!   ([`ProjectDir::meta`], [`ProjectDir::read_text`], [`ProjectDir::read_bytes`],
//!   [`ProjectDir::open_file`] for a read in pieces, [`ProjectDir::list`]) and changing
//!   ([`ProjectDir::write_text`], [`ProjectDir::write_bytes`], [`ProjectDir::stage_write`]
//!   for a write in pieces, [`ProjectDir::create_dir`], [`ProjectDir::delete`],
//!   [`ProjectDir::delete_recursive`] and [`ProjectDir::rename`], which never replaces:
//!   `renameat2(RENAME_NOREPLACE)`).
//! - [`version`]: [`ContentVersion`], a file content's version for stale-write checks.
//! - [`ProjectDir::shape`] and [`ProjectDir::restore_shape`] (`project/shape.rs`): what a
//!   changing call may change, walked with its files' bytes streamed to a [`Visit`], and put
//!   back, for the host's undo; [`ProjectDir::snapshot`] and [`ProjectDir::restore`]
//!   (`project/snapshot.rs`) hold the bytes in memory as [`Node`]s.
//! - `testing` (feature `testing`): a temp world with leak markers outside the root.
//!
//! # Writing a file tool
//!
//! ```no_run
//! use rojos_fs_guard::ProjectDir;
//! use rojos_plugin_api::{CallContext, ToolError};
//!
//! fn call(ctx: &CallContext, path: &str) -> Result<String, ToolError> {
//!     let dir = ProjectDir::from_context(ctx)?;
//!     Ok(dir.read_text(path)?)
//! }
//! ```
//!
//! Never open paths with `std::fs` in a tool: `clippy.toml` in each tool crate forbids it.

pub mod args;
pub mod error;
pub mod limits;
pub mod names;
pub mod path;
pub mod project;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod version;

pub use args::parse_args;
pub use error::{from_io, Current, PathError, Shown};
pub use names::{escaped, is_invisible, json_escaped};
pub use path::{check_path, PathUse, RelPath, MAX_NAME_BYTES, MAX_PATH_BYTES};
pub use project::{
    EntryType, IfExists, ListEntry, Listing, Node, OpenedFile, PathMeta, ProjectDir, Recorded,
    Shape, Shaped, StagedWrite, Visit, Written, MAX_DELETE_DEPTH,
};
pub use version::{BadVersion, ContentVersion};
