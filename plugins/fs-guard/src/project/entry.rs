//! The entries a listing reports: [`EntryType`] and [`ListEntry`], shared by the listing in
//! `mod.rs` and its cut in `first_names`.

use serde::Serialize;

/// The two kinds of entry the tools report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    /// A regular file.
    File,
    /// A folder.
    Directory,
}

/// One entry of a folder listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    /// The entry's name (never a path).
    pub name: String,
    /// Its type; for an in-root symlink, the type of its target.
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Whether the entry itself is a symbolic link (to something in the project). Not part of
    /// `list_files`' result; a tool that walks folders skips these to visit each file once
    /// and never loop.
    #[serde(skip)]
    pub symlink: bool,
}
