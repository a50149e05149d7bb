//! The log's format: its records ([`Record`]), what they say together ([`Manifest`]), a
//! recorded path ([`Entry`], [`StoredNode`]) and the log's file name.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, BufRead, BufReader, Read},
};

use cap_std::fs::Dir;
use rojos_fs_guard::Shape;
use serde::{Deserialize, Serialize};

use crate::head::Head;

/// The ending of a run's log file name.
pub(super) const LOG: &str = ".log";
/// The log format this host writes and reads.
pub(super) const VERSION: u32 = 2;

/// What a recorded path held, with files' bytes in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum StoredNode {
    /// Nothing stood there.
    Absent,
    /// A regular file.
    File {
        /// Its permission bits.
        mode: u32,
        /// Where its bytes start: in the file, the offset in the log; in a record, the offset
        /// from the end of the record's line.
        at: u64,
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
pub(crate) struct Entry {
    /// The path, relative to the project root.
    pub(crate) path: String,
    /// What it held before the run.
    pub(crate) before: StoredNode,
    /// The fingerprint of what it held before the run.
    pub(crate) before_print: String,
    /// The fingerprint of what it held after the run's last changing call (`None`: it could
    /// not be read then, so an undo needs `force`). Not part of a `call` record.
    #[serde(skip)]
    pub(crate) after: Option<String>,
}

/// One line of a log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
pub(super) enum Record {
    Run {
        version: u32,
        run: String,
        message: u64,
        #[serde(rename = "createdAt")]
        created_at: u64,
        /// Set in a log rewritten without its content.
        #[serde(default)]
        evicted: bool,
        /// In a log rewritten without its content: whether the run changed anything (its
        /// entries, which told, are not kept).
        #[serde(default)]
        changed: bool,
    },
    Call {
        /// The paths the call named that earlier calls of the run did not.
        paths: Vec<String>,
        /// The paths recorded for the first time.
        entries: Vec<Entry>,
        /// The bytes of files that follow the line.
        payload: u64,
    },
    After {
        /// Every entry's fingerprint now, in the entries' order.
        prints: Vec<Option<String>>,
    },
    Undone,
}

/// What a run's log says.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    /// The conversation's id (a validated `ConversationId`: no `.` in it).
    pub(crate) conversation: String,
    /// The run's id: `<created ms>-<message index>`.
    pub(crate) run: String,
    /// The index of the run's user message in the conversation.
    pub(crate) message: u64,
    /// When the first change was recorded, in Unix milliseconds.
    pub(crate) created_at: u64,
    /// The paths the run's calls named, as the model wrote them, in order.
    pub(crate) paths: Vec<String>,
    /// The recorded paths, in the order recorded (restored in reverse).
    pub(crate) entries: Vec<Entry>,
    /// The bytes of file content the log holds.
    pub(crate) bytes: u64,
    /// Set once the run's changes were undone.
    pub(crate) undone: bool,
    /// Set when the budget dropped its content: it can no longer be undone.
    pub(crate) evicted: bool,
    /// Set in a dropped log whose run changed anything (its entries are gone).
    pub(super) changed: bool,
    /// The longest record line in the log.
    pub(crate) longest: u64,
    /// The length of the log's whole records: where the next one goes.
    pub(super) len: u64,
}

impl Manifest {
    /// The manifest of a new run's log.
    pub(crate) fn new(conversation: &str, run: String, message: u64, created_at: u64) -> Manifest {
        Manifest {
            conversation: conversation.to_owned(),
            run,
            message,
            created_at,
            paths: Vec::new(),
            entries: Vec::new(),
            bytes: 0,
            undone: false,
            evicted: false,
            changed: false,
            longest: 0,
            len: 0,
        }
    }

    /// Whether any recorded path differs after the run from before it.
    pub(crate) fn changed_anything(&self) -> bool {
        self.changed
            || self
                .entries
                .iter()
                .any(|e| e.after.as_deref() != Some(e.before_print.as_str()))
    }

    /// The head of the log this manifest describes.
    pub(crate) fn head(&self) -> Head {
        Head {
            log_len: self.len(),
            run: self.run.clone(),
            message: self.message,
            created_at: self.created_at,
            paths: self.paths.clone(),
            undone: self.undone,
            evicted: self.evicted,
            changed: self.changed_anything(),
            longest: self.longest,
            conversation: self.conversation.clone(),
            unreadable: None,
            disk: 0,
        }
    }

    /// The length of the log's whole records.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Reads the log called `name` in a project's `checkpoints` folder (record lines of at
    /// most `max_line` bytes); `None` when `name` is not a run's log.
    pub(crate) fn read(
        checkpoints: &Dir,
        name: &str,
        max_line: u64,
    ) -> io::Result<Option<Manifest>> {
        let Some((conversation, run)) = log_parts(name) else {
            return Ok(None);
        };
        let file = checkpoints.open(name)?.into_std();
        Manifest::parse(&file, conversation, run, max_line).map(Some)
    }

    /// The file name of the log.
    pub(super) fn file_name(&self) -> String {
        log_name(&self.conversation, &self.run)
    }

    /// Parses a log up to its last whole record.
    pub(super) fn parse(
        file: &File,
        conversation: &str,
        run: &str,
        max_line: u64,
    ) -> io::Result<Manifest> {
        let size = file.metadata()?.len();
        let mut reader = BufReader::new(file);
        let damaged = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let mut manifest = match next_record(&mut reader, size, 0, max_line)? {
            Some((
                Record::Run {
                    version: VERSION,
                    run: named,
                    message,
                    created_at,
                    evicted,
                    changed,
                },
                len,
            )) if named == run => Manifest {
                evicted,
                changed,
                longest: len,
                len,
                ..Manifest::new(conversation, named, message, created_at)
            },
            Some((Record::Run { version, .. }, _)) if version != VERSION => {
                return Err(damaged(format!(
                    "checkpoint format {version} is not {VERSION}"
                )))
            }
            _ => return Err(damaged(format!("checkpoint {run} does not start as one"))),
        };
        while let Some((record, end)) = next_record(&mut reader, size, manifest.len, max_line)? {
            let start = end - record.payload();
            manifest.longest = manifest.longest.max(start - manifest.len);
            manifest.apply(record, start);
            manifest.len = end;
        }
        Ok(manifest)
    }

    /// Adds what `record` says (its file content starting at `payload_at` in the log).
    pub(super) fn apply(&mut self, record: Record, payload_at: u64) {
        match record {
            Record::Run { .. } => {}
            Record::Call {
                paths,
                entries,
                payload,
            } => {
                for mut entry in entries {
                    entry.before.shift(payload_at);
                    entry.after = Some(entry.before_print.clone());
                    self.entries.push(entry);
                }
                self.paths.extend(paths);
                self.bytes += payload;
            }
            Record::After { prints } => {
                for (entry, print) in self.entries.iter_mut().zip(prints) {
                    entry.after = print;
                }
            }
            Record::Undone => self.undone = true,
        }
    }
}

impl Record {
    pub(super) fn payload(&self) -> u64 {
        match self {
            Record::Call { payload, .. } => *payload,
            _ => 0,
        }
    }

    /// The record's line, ending in a newline.
    pub(super) fn line(&self) -> io::Result<Vec<u8>> {
        let mut line = serde_json::to_vec(self).map_err(io::Error::other)?;
        line.push(b'\n');
        Ok(line)
    }
}

/// The file name of the log of `run` in `conversation`.
pub(super) fn log_name(conversation: &str, run: &str) -> String {
    format!("{conversation}.{run}{LOG}")
}

/// The conversation and the run a log's file name names; `None` for another file.
pub(crate) fn log_parts(name: &str) -> Option<(&str, &str)> {
    name.strip_suffix(LOG).and_then(|n| n.split_once('.'))
}

/// The record starting at `at` (where `reader` stands) and the offset after it; `None` at
/// the end or at a torn record (the end of what was written whole).
///
/// # Errors
///
/// A line longer than `max_line` that the file goes on after (`InvalidData`): a record
/// written under a larger `[limits] checkpoint_record_bytes`, or damage, but not a torn end.
pub(super) fn next_record(
    reader: &mut BufReader<&File>,
    size: u64,
    at: u64,
    max_line: u64,
) -> io::Result<Option<(Record, u64)>> {
    let mut line = Vec::new();
    let read = reader
        .by_ref()
        .take(max_line)
        .read_until(b'\n', &mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        if at + (read as u64) < size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a record at byte {at} is longer than {max_line} bytes ([limits] \
                     checkpoint_record_bytes): raise it to read this checkpoint"
                ),
            ));
        }
        return Ok(None); // the file ends inside the record: a torn end
    }
    let Ok(record) = serde_json::from_slice::<Record>(&line) else {
        return Ok(None);
    };
    let payload_at = at + read as u64;
    let end = payload_at.saturating_add(record.payload());
    if end > size {
        return Ok(None);
    }
    let skip = i64::try_from(record.payload()).map_err(io::Error::other)?;
    reader.seek_relative(skip)?;
    Ok(Some((record, end)))
}

impl StoredNode {
    /// This node as fs-guard restores it (files' offsets in the log).
    pub(crate) fn shape(&self) -> Shape {
        match self {
            StoredNode::Absent => Shape::Absent,
            StoredNode::File { mode, at, size } => Shape::File {
                mode: *mode,
                size: *size,
                at: *at,
            },
            StoredNode::Folder { mode, entries } => Shape::Folder {
                mode: *mode,
                entries: entries
                    .iter()
                    .map(|(name, entry)| (name.clone(), entry.shape()))
                    .collect(),
            },
            StoredNode::Symlink { target } => Shape::Symlink {
                target: target.clone(),
            },
        }
    }

    /// Makes the files' offsets count from the log's start (`base`: where the record's
    /// content starts).
    pub(super) fn shift(&mut self, base: u64) {
        match self {
            StoredNode::File { at, .. } => *at += base,
            StoredNode::Folder { entries, .. } => entries.values_mut().for_each(|e| e.shift(base)),
            StoredNode::Absent | StoredNode::Symlink { .. } => {}
        }
    }
}
