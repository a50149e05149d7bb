//! Snapshots held in memory: a [`Node`] is a [`Shape`] with its files' bytes.
//! [`ProjectDir::snapshot`] and [`ProjectDir::restore`] are `shape.rs`'s walk and restore
//! with the bytes collected; [`ProjectDir::snapshot_creation`] records what a call that only
//! creates may change, reading nothing that exists.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::os::fd::AsFd;

use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::shape::{recorded_entry, Shape, Visit};
use super::ProjectDir;
use crate::error::{from_io, PathError};

/// What stood at one path: enough to put it back byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Nothing.
    Absent,
    /// A regular file: its bytes and its permission bits (`0o777` at most, as writes keep).
    File {
        /// The permission bits.
        mode: u32,
        /// The content.
        bytes: Vec<u8>,
    },
    /// A folder and everything in it.
    Folder {
        /// The permission bits.
        mode: u32,
        /// Its entries by name.
        entries: BTreeMap<String, Node>,
    },
    /// A symbolic link, as a link (its target is never followed).
    Symlink {
        /// The link's target text.
        target: String,
    },
}

impl Node {
    /// The content bytes this node holds (files' bytes and links' targets, everything below).
    pub fn content_bytes(&self) -> u64 {
        match self {
            Node::Absent => 0,
            Node::File { bytes, .. } => bytes.len() as u64,
            Node::Symlink { target } => target.len() as u64,
            Node::Folder { entries, .. } => entries.values().map(Node::content_bytes).sum(),
        }
    }

    /// This node as a [`Shape`], its files' bytes appended to `bytes` in the walk's order
    /// (each file's `at` is where its bytes start there).
    fn to_shape(&self, bytes: &mut Vec<u8>) -> Shape {
        match self {
            Node::Absent => Shape::Absent,
            Node::File { mode, bytes: own } => {
                let at = bytes.len() as u64;
                bytes.extend_from_slice(own);
                Shape::File {
                    mode: *mode,
                    size: own.len() as u64,
                    at,
                }
            }
            Node::Symlink { target } => Shape::Symlink {
                target: target.clone(),
            },
            Node::Folder { mode, entries } => Shape::Folder {
                mode: *mode,
                entries: (entries.iter())
                    .map(|(name, entry)| (name.clone(), entry.to_shape(bytes)))
                    .collect(),
            },
        }
    }

    /// The node `shape` stands for, each file's bytes taken from `bytes` at its `at`.
    fn from_shape(shape: &Shape, bytes: &[u8]) -> Node {
        match shape {
            Shape::Absent => Node::Absent,
            Shape::File { mode, size, at } => Node::File {
                mode: *mode,
                bytes: part(bytes, *at, *size).to_vec(),
            },
            Shape::Symlink { target } => Node::Symlink {
                target: target.clone(),
            },
            Shape::Folder { mode, entries } => Node::Folder {
                mode: *mode,
                entries: (entries.iter())
                    .map(|(name, entry)| (name.clone(), Node::from_shape(entry, bytes)))
                    .collect(),
            },
        }
    }
}

/// One path of a snapshot and what stood there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The path, relative to the root, without empty and `.` parts.
    pub path: String,
    /// What stood there.
    pub node: Node,
}

/// The `size` bytes at `at` of `bytes` (as many of them as it holds).
fn part(bytes: &[u8], at: u64, size: u64) -> &[u8] {
    let start = usize::try_from(at).map_or(bytes.len(), |at| at.min(bytes.len()));
    let end =
        usize::try_from(at.saturating_add(size)).map_or(bytes.len(), |end| end.min(bytes.len()));
    &bytes[start..end.max(start)]
}

/// The files' bytes of a walk, in its order: the [`Visit`] behind [`ProjectDir::snapshot`].
#[derive(Default)]
struct Collected(Vec<u8>);

impl Visit for Collected {
    fn absent(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn folder(&mut self, _mode: u32, _entries: usize) -> io::Result<()> {
        Ok(())
    }
    fn entry(&mut self, _name: &str) -> io::Result<()> {
        Ok(())
    }
    fn symlink(&mut self, _target: &str) -> io::Result<()> {
        Ok(())
    }
    fn file(&mut self, _mode: u32, _size: u64, _at: u64, content: &mut dyn Read) -> io::Result<()> {
        content.read_to_end(&mut self.0).map(drop)
    }
}

impl ProjectDir {
    /// [`ProjectDir::shape`] with the files' bytes collected in memory, as [`Node`]s.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::shape`].
    pub fn snapshot(&self, path: &str, max_bytes: u64) -> Result<Vec<Recorded>, PathError> {
        let mut collected = Collected::default();
        let shaped = self.shape(path, max_bytes, Some(&mut collected))?;
        Ok(shaped
            .into_iter()
            .map(|shaped| Recorded {
                node: Node::from_shape(&shaped.shape, &collected.0),
                path: shaped.path,
            })
            .collect())
    }

    /// What a call that only creates `path` may change, as it is now: each missing folder on
    /// the way, then the entry itself if it is missing. What exists there is left out: such a
    /// call leaves it as it is (`create_directory` on an existing folder), so nothing of it
    /// is read.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::shape`].
    pub fn snapshot_creation(&self, path: &str) -> Result<Vec<Recorded>, PathError> {
        let Some((parent, leaf, full)) = recorded_entry(path)? else {
            return Ok(Vec::new());
        };
        let (folder, missing) = self.open_entry_folder(&parent, path)?;
        let absent = |path| Recorded {
            path,
            node: Node::Absent,
        };
        let mut recorded: Vec<Recorded> = missing.into_iter().map(absent).collect();
        match folder {
            Ok(folder) => {
                match rustix::fs::statat(folder.as_fd(), leaf, AtFlags::SYMLINK_NOFOLLOW) {
                    Err(Errno::NOENT) => {}
                    Ok(_) => return Ok(recorded),
                    Err(e) => return Err(from_io(path, e.into())),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(from_io(path, e)),
        }
        recorded.push(absent(full));
        Ok(recorded)
    }

    /// [`ProjectDir::restore_shape`] of `node`, its files' bytes from memory.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::restore_shape`].
    pub fn restore(&self, path: &str, node: &Node) -> Result<(), PathError> {
        let mut bytes = Vec::new();
        let shape = node.to_shape(&mut bytes);
        self.restore_shape(path, &shape, &mut |at, size, out| {
            out.write_all(part(&bytes, at, size))
        })
    }
}
