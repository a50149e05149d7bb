//! A checkpoint on disk: `<storage>/<projectId>/checkpoints/<conversationId>/<run>/` holds
//! `manifest.json` (what each recorded path held before the run, and its fingerprint after
//! the run's last changing call) and `blobs/<n>` (the recorded files' bytes). Blobs are
//! written and synced before the manifest that names them; the manifest is replaced
//! atomically (temporary file, fsync, rename, fsync of the folder), so a crash leaves the
//! previous manifest whole. docs/api.md "Undo of file changes" describes the layout.

use std::{collections::BTreeMap, io, io::Write};

use cap_std::fs::Dir;
use rojos_fs_guard::Node;
use serde::{Deserialize, Serialize};

/// The manifest's file name.
const MANIFEST: &str = "manifest.json";
/// The folder of a checkpoint's blobs.
const BLOBS: &str = "blobs";
/// The manifest format this host writes and reads.
const VERSION: u32 = 1;

/// What a recorded path held, with files' bytes in blobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(super) enum StoredNode {
    /// Nothing stood there.
    Absent,
    /// A regular file.
    File {
        /// Its permission bits.
        mode: u32,
        /// The blob holding its bytes.
        blob: String,
        /// Its size.
        size: u64,
    },
    /// A folder and what was in it.
    Folder {
        /// Its permission bits.
        mode: u32,
        /// Its entries by name.
        entries: BTreeMap<String, StoredNode>,
    },
    /// A symbolic link.
    Symlink {
        /// Its target text.
        target: String,
    },
}

/// One recorded path.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Entry {
    /// The path, relative to the project root.
    pub(super) path: String,
    /// What it held before the run.
    pub(super) before: StoredNode,
    /// The fingerprint of what it held before the run.
    pub(super) before_print: String,
    /// The fingerprint of what it held after the run's last changing call (`None`: it could
    /// not be read then, so an undo needs `force`).
    pub(super) after: Option<String>,
}

/// A run's checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Manifest {
    pub(super) version: u32,
    /// The run's id: `<created ms>-<message index>`.
    pub(super) run: String,
    /// The index of the run's user message in the conversation.
    pub(super) message: u64,
    /// When the first change was recorded, in Unix milliseconds.
    pub(super) created_at: u64,
    /// The paths the run's calls named, as the model wrote them, in order.
    pub(super) paths: Vec<String>,
    /// The recorded paths, in the order recorded (restored in reverse).
    pub(super) entries: Vec<Entry>,
    /// The bytes its blobs hold.
    pub(super) bytes: u64,
    /// Set once the run's changes were undone.
    pub(super) undone: bool,
    /// Set when the budget dropped its blobs: it can no longer be undone.
    pub(super) evicted: bool,
    /// The next blob's name.
    pub(super) next_blob: u64,
}

impl Manifest {
    /// A new, empty checkpoint.
    pub(super) fn new(run: String, message: u64, created_at: u64) -> Manifest {
        Manifest {
            version: VERSION,
            run,
            message,
            created_at,
            paths: Vec::new(),
            entries: Vec::new(),
            bytes: 0,
            undone: false,
            evicted: false,
            next_blob: 0,
        }
    }

    /// Reads the manifest of the checkpoint folder `run`.
    pub(super) fn read(run: &Dir) -> io::Result<Manifest> {
        let text = run.read(MANIFEST)?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if manifest.version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("checkpoint format {} is not {VERSION}", manifest.version),
            ));
        }
        Ok(manifest)
    }

    /// Whether the checkpoint keeps earlier file content (blobs): the only copy of bytes a
    /// tool replaced or deleted, which a crash must not lose.
    pub(super) fn holds_content(&self) -> bool {
        self.next_blob > 0
    }

    /// Replaces the manifest of the checkpoint folder `run` atomically. It is synced (file,
    /// then folder) when it holds content; a manifest of absences only (new files and
    /// folders) is not: a crash may lose it, and with it only the undo of creations, which
    /// costs the user nothing (this saved most of a changing call's fsyncs, rojos-bench S1).
    pub(super) fn write(&self, run: &Dir) -> io::Result<()> {
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        let temp = format!("{MANIFEST}.tmp");
        if !self.holds_content() {
            run.write(&temp, &json)?;
            return run.rename(&temp, run, MANIFEST);
        }
        write_synced(run, &temp, &json)?;
        run.rename(&temp, run, MANIFEST)?;
        sync_dir(run)
    }

    /// Stores `node` (its files' bytes as new blobs of `run`, synced) and returns its
    /// stored form.
    pub(super) fn store_node(&mut self, run: &Dir, node: &Node) -> io::Result<StoredNode> {
        Ok(match node {
            Node::Absent => StoredNode::Absent,
            Node::File { mode, bytes } => {
                let blobs = open_or_create(run, BLOBS)?;
                let blob = self.next_blob.to_string();
                self.next_blob += 1;
                write_synced(&blobs, &blob, bytes)?;
                sync_dir(&blobs)?;
                self.bytes += bytes.len() as u64;
                StoredNode::File {
                    mode: *mode,
                    blob,
                    size: bytes.len() as u64,
                }
            }
            Node::Folder { mode, entries } => {
                let mut stored = BTreeMap::new();
                for (name, entry) in entries {
                    stored.insert(name.clone(), self.store_node(run, entry)?);
                }
                StoredNode::Folder {
                    mode: *mode,
                    entries: stored,
                }
            }
            Node::Symlink { target } => StoredNode::Symlink {
                target: target.clone(),
            },
        })
    }

    /// Drops the blobs (the checkpoint stays listed, as evicted).
    pub(super) fn evict(&mut self, run: &Dir) -> io::Result<()> {
        match run.remove_dir_all(BLOBS) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.evicted = true;
        self.bytes = 0;
        self.write(run)
    }
}

impl StoredNode {
    /// The node with its files' bytes read back from `run`'s blobs.
    pub(super) fn load(&self, run: &Dir) -> io::Result<Node> {
        Ok(match self {
            StoredNode::Absent => Node::Absent,
            StoredNode::File { mode, blob, .. } => Node::File {
                mode: *mode,
                bytes: run.read(format!("{BLOBS}/{}", blob_name(blob)?))?,
            },
            StoredNode::Folder { mode, entries } => {
                let mut loaded = BTreeMap::new();
                for (name, entry) in entries {
                    loaded.insert(name.clone(), entry.load(run)?);
                }
                Node::Folder {
                    mode: *mode,
                    entries: loaded,
                }
            }
            StoredNode::Symlink { target } => Node::Symlink {
                target: target.clone(),
            },
        })
    }
}

/// A blob's name as the manifest gives it: digits only, so a damaged manifest cannot name
/// another file.
fn blob_name(blob: &str) -> io::Result<&str> {
    if !blob.is_empty() && blob.bytes().all(|b| b.is_ascii_digit()) {
        Ok(blob)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad blob name {blob:?}"),
        ))
    }
}

/// Writes `bytes` to the file `name` of `dir` (replacing it) and syncs it.
fn write_synced(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut file = dir.create(name)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Syncs a folder, so the names in it survive a crash (through a handle opened for reading:
/// cap-std's own folder handles are `O_PATH`, which cannot be synced).
pub(super) fn sync_dir(dir: &Dir) -> io::Result<()> {
    use cap_std::fs::{OpenOptions, OpenOptionsExt};
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32);
    dir.open_with(".", &options)?.sync_all()
}

/// A checkpoint's folders are created as the storage's are (not synced: a checkpoint that
/// holds content syncs the folders on its way, `Checkpoints::record`).
pub(super) use crate::storage::open_or_create_dir as open_or_create;
