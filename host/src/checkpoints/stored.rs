//! A checkpoint on disk: one append-only log per run,
//! `<storage>/<projectId>/checkpoints/<conversationId>.<run>.log`. Each record is one line of
//! JSON, followed by the bytes of the files it recorded when it has any:
//!
//! - `run`: the first record (format version, run id, message index, creation time);
//! - `call`: the paths one call named and what they held before it (files' bytes follow);
//! - `after`: the fingerprints of every recorded path after a changing call;
//! - `undone`: the run's changes were undone.
//!
//! A record that holds earlier content is synced (`fdatasync`) before the call runs, so the
//! only copy of bytes a tool replaces or deletes survives a crash; records of absences (new
//! files and folders) and fingerprints are not: a crash may lose them, which loses the undo
//! of a creation or makes an undo ask for `force`, never a file. A crash in the middle of an
//! append leaves a torn last record (the file ends inside it), which reading ignores (the
//! next append overwrites it). A record line is at most `[limits] checkpoint_record_bytes`
//! long: a change whose record would be longer is refused before it runs, and a longer line
//! found in a log that goes on after it is not taken for a torn end: the log is unreadable
//! (listed so, never skipped over to an earlier run).
//! One file per run, written by appending, keeps a changing call to one write and at most
//! one sync, and creates one file per run, in one folder per project, instead of folders of
//! replaced manifests and blobs: creating and deleting many small files and folders is what
//! made ext4's inode allocation the hot spot of `rojos-bench` S2 (bench/PROFILE.md). A
//! dropped (evicted) checkpoint is rewritten without its content and entries, keeping the
//! paths the run named (temporary file, sync, rename, sync of the folder). Each log has a
//! small head beside it (`head`), rewritten after every record.
//! docs/api.md "Undo of file changes" describes the layout.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, BufRead, BufReader, Read, Write},
    os::unix::fs::FileExt,
};

use cap_std::fs::{Dir, OpenOptions};
use rojos_fs_guard::{Node, PathError, ProjectDir, Shape, Visit};
use serde::{Deserialize, Serialize};

use super::fingerprint::{self, Hasher};
use super::head::Head;

/// The ending of a run's log file name.
const LOG: &str = ".log";
/// The log format this host writes and reads.
const VERSION: u32 = 2;

/// What a recorded path held, with files' bytes in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(super) enum StoredNode {
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
pub(super) struct Entry {
    /// The path, relative to the project root.
    pub(super) path: String,
    /// What it held before the run.
    pub(super) before: StoredNode,
    /// The fingerprint of what it held before the run.
    pub(super) before_print: String,
    /// The fingerprint of what it held after the run's last changing call (`None`: it could
    /// not be read then, so an undo needs `force`). Not part of a `call` record.
    #[serde(skip)]
    pub(super) after: Option<String>,
}

/// One line of a log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
enum Record {
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
pub(super) struct Manifest {
    /// The conversation's id (a validated `ConversationId`: no `.` in it).
    pub(super) conversation: String,
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
    /// The bytes of file content the log holds.
    pub(super) bytes: u64,
    /// Set once the run's changes were undone.
    pub(super) undone: bool,
    /// Set when the budget dropped its content: it can no longer be undone.
    pub(super) evicted: bool,
    /// Set in a dropped log whose run changed anything (its entries are gone).
    changed: bool,
    /// The longest record line in the log.
    pub(super) longest: u64,
    /// The length of the log's whole records: where the next one goes.
    len: u64,
}

impl Manifest {
    /// The manifest of a new run's log.
    pub(super) fn new(conversation: &str, run: String, message: u64, created_at: u64) -> Manifest {
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
    pub(super) fn changed_anything(&self) -> bool {
        self.changed
            || self
                .entries
                .iter()
                .any(|e| e.after.as_deref() != Some(e.before_print.as_str()))
    }

    /// The head of the log this manifest describes.
    pub(super) fn head(&self) -> Head {
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
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Reads the log called `name` in a project's `checkpoints` folder (record lines of at
    /// most `max_line` bytes); `None` when `name` is not a run's log.
    pub(super) fn read(
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
    fn file_name(&self) -> String {
        log_name(&self.conversation, &self.run)
    }

    /// Parses a log up to its last whole record.
    fn parse(file: &File, conversation: &str, run: &str, max_line: u64) -> io::Result<Manifest> {
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
    fn apply(&mut self, record: Record, payload_at: u64) {
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
    fn payload(&self) -> u64 {
        match self {
            Record::Call { payload, .. } => *payload,
            _ => 0,
        }
    }

    /// The record's line, ending in a newline.
    fn line(&self) -> io::Result<Vec<u8>> {
        let mut line = serde_json::to_vec(self).map_err(io::Error::other)?;
        line.push(b'\n');
        Ok(line)
    }
}

/// The file name of the log of `run` in `conversation`.
fn log_name(conversation: &str, run: &str) -> String {
    format!("{conversation}.{run}{LOG}")
}

/// The conversation and the run a log's file name names; `None` for another file.
pub(super) fn log_parts(name: &str) -> Option<(&str, &str)> {
    name.strip_suffix(LOG).and_then(|n| n.split_once('.'))
}

/// The record starting at `at` (where `reader` stands) and the offset after it; `None` at
/// the end or at a torn record (the end of what was written whole).
///
/// # Errors
///
/// A line longer than `max_line` that the file goes on after (`InvalidData`): a record
/// written under a larger `[limits] checkpoint_record_bytes`, or damage, but not a torn end.
fn next_record(
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

/// A run's log, open for appending and reading content.
#[derive(Debug)]
pub(super) struct Log {
    file: File,
    /// What the log says so far.
    pub(super) manifest: Manifest,
    /// Whether the names on the way to the log are known to be synced.
    pub(super) names_synced: bool,
    /// The project's `checkpoints` folder holding the log and its head (a run's later calls
    /// record there without opening the folder again).
    pub(super) folder: Dir,
    /// The file's length as it was opened (a torn end beyond the whole records is cut off by
    /// the first append).
    file_len: u64,
    /// The bytes the log's head takes on disk.
    head_len: u64,
    /// The longest record line written or read (`[limits] checkpoint_record_bytes`).
    max_line: u64,
}

/// A call's record, made but not written yet: its size is known before anything is. Its
/// fingerprints are placeholders until its content is copied (they have one length).
#[derive(Debug)]
pub(super) struct Pending {
    record: Record,
    /// The length of its line.
    line_len: u64,
    /// Each recorded path, what it held, and where its content starts in the record's.
    copies: Vec<(String, Shape, u64)>,
    holds_content: bool,
}

impl Pending {
    /// The bytes it takes in the log: its line (names and entries) and the files' content.
    pub(super) fn size(&self) -> u64 {
        self.line_len + self.record.payload()
    }

    /// The length of its line (names and entries).
    pub(super) fn line_len(&self) -> u64 {
        self.line_len
    }
}

/// Where a recording reads the content it copies into the log: the project's files.
pub(super) trait Source {
    /// Walks what stands at `path` now through `visit` (at most `max` bytes of content) and
    /// returns its shape.
    fn walk(&self, path: &str, max: u64, visit: &mut dyn Visit) -> Result<Shape, PathError>;
}

impl Source for ProjectDir {
    fn walk(&self, path: &str, max: u64, visit: &mut dyn Visit) -> Result<Shape, PathError> {
        let mut shaped = self.shape(path, max, Some(visit))?;
        Ok(match shaped.pop() {
            Some(last) if last.path == path => last.shape,
            _ => Shape::Absent,
        })
    }
}

/// Why a call's record was not written.
#[derive(Debug, thiserror::Error)]
pub(super) enum CopyError {
    /// A recorded path changed between its two walks (by something else writing to the
    /// project meanwhile).
    #[error("{0} changed while it was recorded for undo: try again")]
    Changed(String),
    /// fs-guard's refusal while reading the content.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The log could not be written.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Why a call's record cannot be made.
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordError {
    /// Its line (names and entries) is over `[limits] checkpoint_record_bytes`.
    #[error("its checkpoint record would hold {size} bytes of names and entries, over the limit of {limit} bytes ([limits] checkpoint_record_bytes)")]
    TooLarge {
        /// The line's length.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// It could not be serialized.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Log {
    /// Creates the log of the run `manifest` (new, empty) in the project's `checkpoints`
    /// folder, which it keeps, with its first record (not synced).
    pub(super) fn create(checkpoints: Dir, manifest: Manifest, max_line: u64) -> io::Result<Log> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        let file = checkpoints
            .open_with(manifest.file_name(), &options)?
            .into_std();
        let mut log = Log {
            file,
            manifest,
            names_synced: false,
            folder: checkpoints,
            file_len: 0,
            head_len: 0,
            max_line,
        };
        let run = Record::Run {
            version: VERSION,
            run: log.manifest.run.clone(),
            message: log.manifest.message,
            created_at: log.manifest.created_at,
            evicted: false,
            changed: false,
        };
        log.append(&run)?;
        Ok(log)
    }

    /// Opens the log of `run` of `conversation` in the project's `checkpoints` folder, for
    /// reading its content and appending.
    pub(super) fn open(
        checkpoints: &Dir,
        conversation: &str,
        run: &str,
        max_line: u64,
    ) -> io::Result<Log> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        let file = checkpoints
            .open_with(log_name(conversation, run), &options)?
            .into_std();
        let manifest = Manifest::parse(&file, conversation, run, max_line)?;
        let file_len = file.metadata()?.len();
        Ok(Log {
            file,
            manifest,
            names_synced: true,
            folder: checkpoints.try_clone()?,
            file_len,
            head_len: super::head::len(checkpoints, conversation, run),
            max_line,
        })
    }

    /// The bytes the log and its head take on disk.
    pub(super) fn disk(&self) -> u64 {
        self.file_len.max(self.manifest.len) + self.head_len
    }

    /// Appends one call's record made by [`prepare`], its content copied from `source` in
    /// parts of [`CHUNK`] bytes and fingerprinted on the way: first a placeholder line (not
    /// a record: a crash leaves a torn end), then the content, then the line with the
    /// fingerprints. Synced when it holds anything but absences. Returns whether it was
    /// synced. On an error the log is left as it was (its whole records).
    pub(super) fn record_call(
        &mut self,
        pending: Pending,
        source: &dyn Source,
    ) -> Result<bool, CopyError> {
        let written = self.write_call(pending, source);
        if written.is_err() {
            // What was written past the log's whole records is cut off again.
            let end = self.manifest.len;
            if self.file.set_len(end).is_ok() {
                self.file_len = end;
            }
        }
        written
    }

    fn write_call(&mut self, pending: Pending, source: &dyn Source) -> Result<bool, CopyError> {
        let Pending {
            mut record,
            line_len,
            copies,
            holds_content,
        } = pending;
        let at = self.manifest.len;
        let payload_at = at + line_len;
        let mut placeholder = vec![b' '; usize::try_from(line_len).map_err(io::Error::other)?];
        if let Some(last) = placeholder.last_mut() {
            *last = b'\n';
        }
        self.file.write_all_at(&placeholder, at)?;
        drop(placeholder);
        let mut prints = Vec::with_capacity(copies.len());
        for (path, shape, base) in &copies {
            if *shape == Shape::Absent {
                prints.push(fingerprint::absent());
                continue;
            }
            let mut copy = Copy {
                file: &self.file,
                at: payload_at + base,
                hasher: Hasher::default(),
            };
            let walked = source.walk(path, shape.content_bytes(), &mut copy)?;
            if walked != *shape {
                return Err(CopyError::Changed(path.clone()));
            }
            prints.push(copy.hasher.finish());
        }
        if let Record::Call { entries, .. } = &mut record {
            for (entry, print) in entries.iter_mut().zip(prints) {
                entry.before_print = print;
            }
        }
        let line = record.line()?;
        if line.len() as u64 != line_len {
            return Err(io::Error::other("a checkpoint record changed its length").into());
        }
        self.file.write_all_at(&line, at)?;
        self.manifest.longest = self.manifest.longest.max(line_len);
        let end = payload_at + record.payload();
        if self.file_len > end {
            self.file.set_len(end)?;
        }
        self.file_len = end;
        self.manifest.len = end;
        if holds_content {
            self.file.sync_data()?;
        }
        self.manifest.apply(record, payload_at);
        self.write_head();
        Ok(holds_content)
    }

    /// Appends every entry's fingerprint after a changing call (not synced); nothing when
    /// they are the ones recorded already.
    pub(super) fn record_after(&mut self, prints: Vec<Option<String>>) -> io::Result<()> {
        if self.manifest.entries.iter().map(|e| &e.after).eq(&prints) {
            return Ok(());
        }
        let record = Record::After { prints };
        self.append(&record)?;
        self.manifest.apply(record, 0);
        self.write_head();
        Ok(())
    }

    /// Marks the run undone (synced).
    pub(super) fn record_undone(&mut self) -> io::Result<()> {
        self.append(&Record::Undone)?;
        self.file.sync_data()?;
        self.manifest.apply(Record::Undone, 0);
        self.write_head();
        Ok(())
    }

    /// Writes the log's head beside it (what listing reads instead of the log); a head not
    /// written is only slower listing (the log is read instead), so a failure is logged.
    fn write_head(&mut self) {
        match super::head::write(&self.folder, &self.manifest.head()) {
            Ok(len) => self.head_len = len,
            Err(e) => {
                tracing::warn!(error = %e, run = %self.manifest.run, "checkpoint head not written")
            }
        }
    }

    /// Writes `record` (one without content) after the last whole record, cutting off a
    /// torn end beyond.
    fn append(&mut self, record: &Record) -> io::Result<()> {
        let line = record.line()?;
        if line.len() as u64 > self.max_line {
            return Err(io::Error::other(RecordError::TooLarge {
                size: line.len() as u64,
                limit: self.max_line,
            }));
        }
        let at = self.manifest.len;
        self.file.write_all_at(&line, at)?;
        self.manifest.longest = self.manifest.longest.max(line.len() as u64);
        let end = at + line.len() as u64;
        if self.file_len > end {
            self.file.set_len(end)?;
        }
        self.file_len = end;
        self.manifest.len = end;
        Ok(())
    }

    /// Walks `stored` through `visit`, files' bytes read back from the log in parts.
    pub(super) fn visit(&self, stored: &StoredNode, visit: &mut dyn Visit) -> io::Result<()> {
        match stored {
            StoredNode::Absent => visit.absent(),
            StoredNode::File { mode, at, size } => {
                let mut part = Part {
                    file: &self.file,
                    at: *at,
                    left: *size,
                };
                visit.file(*mode, *size, *at, &mut part)
            }
            StoredNode::Folder { mode, entries } => {
                visit.folder(*mode, entries.len())?;
                for (name, entry) in entries {
                    visit.entry(name)?;
                    self.visit(entry, visit)?;
                }
                Ok(())
            }
            StoredNode::Symlink { target } => visit.symlink(target),
        }
    }

    /// Copies the `size` bytes at `at` in the log to `out`, in parts of [`CHUNK`] bytes.
    pub(super) fn copy_to(&self, at: u64, size: u64, out: &mut dyn Write) -> io::Result<()> {
        let mut part = Part {
            file: &self.file,
            at,
            left: size,
        };
        let copied = io::copy(&mut part, out)?;
        if copied != size {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// The node `stored` with its files' bytes read back from the log.
    pub(super) fn load(&self, stored: &StoredNode) -> io::Result<Node> {
        Ok(match stored {
            StoredNode::Absent => Node::Absent,
            StoredNode::File { mode, at, size } => {
                let len = usize::try_from(*size).map_err(io::Error::other)?;
                let mut bytes = vec![0; len];
                self.file.read_exact_at(&mut bytes, *at)?;
                Node::File { mode: *mode, bytes }
            }
            StoredNode::Folder { mode, entries } => {
                let mut loaded = BTreeMap::new();
                for (name, entry) in entries {
                    loaded.insert(name.clone(), self.load(entry)?);
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

/// Makes one call's record: the paths it named for the first time (`paths`) and what the
/// newly recorded paths held (their fingerprints are filled in as their content is copied,
/// [`Log::record_call`]); its line at most `max_line` bytes.
///
/// # Errors
///
/// [`RecordError::TooLarge`] when its line is over `[limits] checkpoint_record_bytes`.
pub(super) fn prepare(
    paths: Vec<String>,
    recorded: Vec<(String, Shape)>,
    max_line: u64,
) -> Result<Pending, RecordError> {
    let mut payload = 0;
    let mut entries = Vec::with_capacity(recorded.len());
    let mut copies = Vec::with_capacity(recorded.len());
    for (path, shape) in recorded {
        let base = payload;
        entries.push(Entry {
            path: path.clone(),
            before: stored(&shape, &mut payload),
            // A placeholder of a fingerprint's length (lowercase hex of SHA-256).
            before_print: "0".repeat(64),
            after: None,
        });
        copies.push((path, shape, base));
    }
    let holds_content = copies.iter().any(|(_, shape, _)| *shape != Shape::Absent);
    let record = Record::Call {
        paths,
        entries,
        payload,
    };
    let line_len = record.line()?.len() as u64;
    if line_len > max_line {
        return Err(RecordError::TooLarge {
            size: line_len,
            limit: max_line,
        });
    }
    Ok(Pending {
        record,
        line_len,
        copies,
        holds_content,
    })
}

/// Drops the content of the run `head` describes in the project's `checkpoints` folder (it
/// stays listed, as no longer available): the log is replaced by one with neither content
/// nor entries, only the paths the run named and whether it changed anything (all its head
/// holds), atomically, and its head is written again. Returns the bytes the log and its
/// head take then.
pub(super) fn evict(checkpoints: &Dir, head: &Head) -> io::Result<u64> {
    let mut manifest = Manifest::new(
        &head.conversation,
        head.run.clone(),
        head.message,
        head.created_at,
    );
    manifest.paths = head.paths.clone();
    manifest.undone = head.undone;
    manifest.evicted = true;
    manifest.changed = head.changed;
    let name = manifest.file_name();
    let temp = format!("{name}.tmp");
    let mut file = checkpoints.create(&temp)?;
    let records = [
        Record::Run {
            version: VERSION,
            run: manifest.run.clone(),
            message: manifest.message,
            created_at: manifest.created_at,
            evicted: true,
            changed: manifest.changed,
        },
        Record::Call {
            paths: manifest.paths.clone(),
            entries: Vec::new(),
            payload: 0,
        },
    ];
    for record in records
        .iter()
        .chain(manifest.undone.then_some(&Record::Undone))
    {
        let line = record.line()?;
        file.write_all(&line)?;
        manifest.len += line.len() as u64;
    }
    file.sync_all()?;
    checkpoints.rename(&temp, checkpoints, &name)?;
    sync_dir(checkpoints)?;
    let head = super::head::write(checkpoints, &manifest.head()).unwrap_or(0);
    Ok(manifest.len + head)
}

/// Removes the log of `run` of `conversation` and its head (a dropped run the budget now
/// drops from the listing too).
pub(super) fn remove(checkpoints: &Dir, conversation: &str, run: &str) -> io::Result<()> {
    for name in [
        log_name(conversation, run),
        super::head::name(conversation, run),
    ] {
        match checkpoints.remove_file(&name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// `shape` as a record stores it: each file's offset counted from the record's content
/// start (`payload` so far), in the order a walk copies them (names in order, depth first).
fn stored(shape: &Shape, payload: &mut u64) -> StoredNode {
    match shape {
        Shape::Absent => StoredNode::Absent,
        Shape::File { mode, size, .. } => {
            let at = *payload;
            *payload += size;
            StoredNode::File {
                mode: *mode,
                at,
                size: *size,
            }
        }
        Shape::Folder { mode, entries } => StoredNode::Folder {
            mode: *mode,
            entries: entries
                .iter()
                .map(|(name, entry)| (name.clone(), stored(entry, payload)))
                .collect(),
        },
        Shape::Symlink { target } => StoredNode::Symlink {
            target: target.clone(),
        },
    }
}

/// A recording's walk: each file's bytes copied into the log where its record puts them,
/// and fingerprinted, one part at a time.
struct Copy<'a> {
    file: &'a File,
    /// Where the walk's content starts in the log.
    at: u64,
    hasher: Hasher,
}

impl Visit for Copy<'_> {
    fn absent(&mut self) -> io::Result<()> {
        self.hasher.absent()
    }

    fn folder(&mut self, mode: u32, entries: usize) -> io::Result<()> {
        self.hasher.folder(mode, entries)
    }

    fn entry(&mut self, name: &str) -> io::Result<()> {
        self.hasher.entry(name)
    }

    fn symlink(&mut self, target: &str) -> io::Result<()> {
        self.hasher.symlink(target)
    }

    fn file(&mut self, mode: u32, size: u64, at: u64, content: &mut dyn Read) -> io::Result<()> {
        let mut to = self.at + at;
        let mut teed = Tee {
            content,
            file: self.file,
            to: &mut to,
        };
        self.hasher.file(mode, size, at, &mut teed)
    }
}

/// A file's content on its way into the hasher, written to the log as it passes.
struct Tee<'a, 'b> {
    content: &'a mut dyn Read,
    file: &'b File,
    to: &'a mut u64,
}

impl Read for Tee<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.content.read(buf)?;
        self.file.write_all_at(&buf[..n], *self.to)?;
        *self.to += n as u64;
        Ok(n)
    }
}

/// `left` bytes of the log from `at`, read in parts.
struct Part<'a> {
    file: &'a File,
    at: u64,
    left: u64,
}

impl Read for Part<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.at += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}

impl StoredNode {
    /// This node as fs-guard restores it (files' offsets in the log).
    pub(super) fn shape(&self) -> Shape {
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
    fn shift(&mut self, base: u64) {
        match self {
            StoredNode::File { at, .. } => *at += base,
            StoredNode::Folder { entries, .. } => entries.values_mut().for_each(|e| e.shift(base)),
            StoredNode::Absent | StoredNode::Symlink { .. } => {}
        }
    }
}

/// Syncs a folder, so the names in it survive a crash: through its own handle when that was
/// opened for reading (`Handle::Readable`), else through one opened for it (cap-std's own
/// folder handles are `O_PATH`, which cannot be synced: `EBADF`).
pub(super) fn sync_dir(dir: &Dir) -> io::Result<()> {
    use cap_std::fs::OpenOptionsExt;
    match rustix::fs::fsync(dir) {
        Err(rustix::io::Errno::BADF) => {}
        synced => return synced.map_err(io::Error::from),
    }
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32);
    dir.open_with(".", &options)?.sync_all()
}

/// A checkpoint's folders are created as the storage's are (not synced: a log that holds
/// content syncs the folders on its way, `Checkpoints::record`).
pub(super) use crate::storage::open_or_create_dir as open_or_create;

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest record line in these tests.
    const MAX: u64 = 1 << 20;

    /// The nodes a test records, by path: a [`Source`] as the project's files would be.
    struct Nodes(BTreeMap<String, Node>);

    /// Walks `node` through `visit` as fs-guard's walk does; returns its shape.
    fn walk(node: &Node, at: &mut u64, visit: &mut dyn Visit) -> io::Result<Shape> {
        Ok(match node {
            Node::Absent => {
                visit.absent()?;
                Shape::Absent
            }
            Node::File { mode, bytes } => {
                let size = bytes.len() as u64;
                visit.file(*mode, size, *at, &mut bytes.as_slice())?;
                let shape = Shape::File {
                    mode: *mode,
                    size,
                    at: *at,
                };
                *at += size;
                shape
            }
            Node::Symlink { target } => {
                visit.symlink(target)?;
                Shape::Symlink {
                    target: target.clone(),
                }
            }
            Node::Folder { mode, entries } => {
                visit.folder(*mode, entries.len())?;
                let mut shapes = BTreeMap::new();
                for (name, entry) in entries {
                    visit.entry(name)?;
                    shapes.insert(name.clone(), walk(entry, at, visit)?);
                }
                Shape::Folder {
                    mode: *mode,
                    entries: shapes,
                }
            }
        })
    }

    impl Source for Nodes {
        fn walk(&self, path: &str, _max: u64, visit: &mut dyn Visit) -> Result<Shape, PathError> {
            let node = self.0.get(path).cloned().unwrap_or(Node::Absent);
            walk(&node, &mut 0, visit).map_err(|e| rojos_fs_guard::from_io(path, e))
        }
    }

    /// The shape of `node` (as a first walk finds it).
    fn shape(node: &Node) -> Shape {
        let mut hasher = Hasher::default();
        walk(node, &mut 0, &mut hasher).expect("walk")
    }

    /// The fingerprint of `node`.
    fn print(node: &Node) -> String {
        let mut hasher = Hasher::default();
        walk(node, &mut 0, &mut hasher).expect("walk");
        hasher.finish()
    }

    /// Appends one call's record to `log`.
    fn record(
        log: &mut Log,
        paths: Vec<String>,
        recorded: Vec<(String, Node)>,
    ) -> io::Result<bool> {
        let shapes = recorded
            .iter()
            .map(|(p, n)| (p.clone(), shape(n)))
            .collect();
        let pending = prepare(paths, shapes, MAX).map_err(io::Error::other)?;
        log.record_call(pending, &Nodes(recorded.into_iter().collect()))
            .map_err(io::Error::other)
    }

    fn folder() -> (tempfile::TempDir, Dir) {
        let temp = tempfile::tempdir().expect("temp");
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).expect("open");
        (temp, dir)
    }

    fn file(bytes: &[u8]) -> Node {
        Node::File {
            mode: 0o640,
            bytes: bytes.to_vec(),
        }
    }

    fn run() -> Manifest {
        Manifest::new("conv", "0000000000001-0".into(), 0, 1)
    }

    /// The manifest of [`run`]'s log as a reader finds it.
    fn read_back(dir: &Dir) -> Manifest {
        Manifest::read(dir, "conv.0000000000001-0.log", MAX)
            .expect("read")
            .expect("a log")
    }

    #[test]
    fn a_folder_syncs_through_a_readable_handle_and_through_an_o_path_one() {
        use rustix::fs::{openat, Mode, OFlags, CWD};
        let temp = tempfile::tempdir().expect("temp");
        let open = |flags: OFlags| {
            let fd = openat(CWD, temp.path(), flags | OFlags::DIRECTORY, Mode::empty());
            Dir::from_std_file(std::fs::File::from(fd.expect("open")))
        };
        let path_only = open(OFlags::PATH);
        assert_eq!(rustix::fs::fsync(&path_only), Err(rustix::io::Errno::BADF));
        sync_dir(&path_only).expect("an O_PATH handle's folder is opened to sync it");
        sync_dir(&open(OFlags::RDONLY)).expect("a readable handle syncs itself");
    }

    #[test]
    fn fingerprints_already_recorded_are_not_appended_again() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        record(&mut log, vec!["a".into()], vec![("a".into(), Node::Absent)]).expect("record");
        let len = log.manifest.len;
        log.record_after(vec![Some(print(&Node::Absent))])
            .expect("same");
        assert_eq!(log.manifest.len, len, "nothing appended");
        log.record_after(vec![Some("q".into())]).expect("changed");
        assert!(log.manifest.len > len);
        let afters: Vec<_> = read_back(&dir)
            .entries
            .into_iter()
            .map(|e| e.after)
            .collect();
        assert_eq!(afters, [Some("q".to_owned())]);
    }

    #[test]
    fn records_read_back_with_their_content_and_fingerprints() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        let tree = Node::Folder {
            mode: 0o755,
            entries: BTreeMap::from([("a".into(), file(b"one")), ("b".into(), file(b"two!"))]),
        };
        assert!(!record(
            &mut log,
            vec!["new".into()],
            vec![("new".into(), Node::Absent)]
        )
        .expect("absence"));
        assert!(record(
            &mut log,
            vec!["docs".into()],
            vec![("docs".into(), tree.clone())]
        )
        .expect("content"));
        log.record_after(vec![Some("q0".into()), None])
            .expect("after");
        drop(log);

        let read = read_back(&dir);
        assert_eq!(read.paths, ["new", "docs"]);
        assert_eq!(read.bytes, 7);
        let afters: Vec<_> = read.entries.iter().map(|e| e.after.clone()).collect();
        assert_eq!(afters, [Some("q0".to_owned()), None]);
        let log = Log::open(&dir, "conv", &read.run, MAX).expect("open");
        assert_eq!(log.load(&read.entries[1].before).expect("load"), tree);
        assert!(Manifest::read(&dir, "notes.txt", MAX)
            .expect("skip")
            .is_none());
        assert!(Manifest::read(&dir, "conv.log", MAX)
            .expect("skip")
            .is_none());
        assert_eq!(
            log_parts("conv.0000000000001-0.log"),
            Some(("conv", "0000000000001-0"))
        );
        assert_eq!(log_parts("conv.0000000000001-0.log.tmp"), None);
        assert_eq!(log_parts("conv.0000000000001-0.head"), None);
    }

    #[test]
    fn a_torn_last_record_is_ignored_and_overwritten_by_the_next() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        record(
            &mut log,
            vec!["a".into()],
            vec![("a".into(), file(b"kept"))],
        )
        .expect("record");
        let whole = log.manifest.len;
        // A crash in the middle of the next record: its line, half its content.
        let line = br#"{"t":"call","paths":["b"],"entries":[],"payload":10}"#;
        log.file.write_all_at(line, whole).expect("torn line");
        log.file
            .write_all_at(b"\nhalf", whole + line.len() as u64)
            .expect("torn");
        drop(log);

        let mut log = Log::open(&dir, "conv", "0000000000001-0", MAX).expect("open");
        assert_eq!(log.manifest.len, whole);
        assert_eq!(log.manifest.paths, ["a"]);
        log.record_undone().expect("undone");
        let read = read_back(&dir);
        assert!(read.undone);
        assert_eq!(
            log.load(&read.entries[0].before).expect("load"),
            file(b"kept")
        );
    }

    #[test]
    fn a_line_over_the_limit_is_refused_when_written_and_not_taken_for_a_torn_end_when_read() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        let many: Vec<(String, Node)> = (0..64)
            .map(|i| (format!("file-{i:04}"), Node::Absent))
            .collect();
        let shapes = many.iter().map(|(p, n)| (p.clone(), shape(n))).collect();
        match prepare(Vec::new(), shapes, 256) {
            Err(RecordError::TooLarge { size, limit: 256 }) => assert!(size > 256),
            other => panic!("expected a refusal, got {other:?}"),
        }
        record(&mut log, vec!["a".into()], many.clone()).expect("within MAX");
        record(&mut log, vec!["b".into()], vec![("b".into(), file(b"x"))]).expect("a later record");
        drop(log);
        // Read with a smaller limit (a host whose limit was lowered): the long record is
        // followed by another, so it is not a torn end, and the log is not cut short there.
        let error = Manifest::read(&dir, "conv.0000000000001-0.log", 256).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error.to_string().contains("checkpoint_record_bytes"),
            "{error}"
        );
        assert_eq!(read_back(&dir).paths, ["a", "b"]);
    }

    #[test]
    fn an_evicted_log_keeps_its_listing_but_no_content() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        record(
            &mut log,
            vec!["a".into()],
            vec![("a".into(), file(b"content"))],
        )
        .expect("record");
        log.record_after(vec![Some("q".into())]).expect("after");
        let head = log.manifest.head();
        drop(log);
        evict(&dir, &head).expect("evict");
        let read = read_back(&dir);
        assert!(read.evicted);
        assert_eq!(read.bytes, 0);
        assert_eq!(read.paths, ["a"]);
        assert!(read.entries.is_empty(), "no entries kept");
        assert!(read.changed_anything(), "still listed as a change");
        let size = dir
            .metadata("conv.0000000000001-0.log")
            .expect("stat")
            .len();
        assert_eq!(size, read.len, "no content left in the file");
        assert!(dir.metadata("conv.0000000000001-0.log.tmp").is_err());
    }

    /// A [`Source`] whose files grew since the first walk.
    struct Grown;

    impl Source for Grown {
        fn walk(&self, path: &str, _max: u64, visit: &mut dyn Visit) -> Result<Shape, PathError> {
            walk(&file(b"longer now"), &mut 0, visit).map_err(|e| rojos_fs_guard::from_io(path, e))
        }
    }

    #[test]
    fn content_is_copied_in_parts_and_a_change_between_the_walks_leaves_the_log_whole() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run(), MAX).expect("create");
        // Over several parts of the copy.
        let big = file(&(0..200_000u32).map(|n| n as u8).collect::<Vec<_>>());
        record(
            &mut log,
            vec!["big".into()],
            vec![("big".into(), big.clone())],
        )
        .expect("record");
        let whole = log.manifest.len;
        let pending = prepare(
            vec!["b".into()],
            vec![("b".into(), shape(&file(b"x")))],
            MAX,
        )
        .expect("prepared");
        match log.record_call(pending, &Grown) {
            Err(CopyError::Changed(path)) => assert_eq!(path, "b"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(log.manifest.len, whole);
        let on_disk = dir
            .metadata("conv.0000000000001-0.log")
            .expect("stat")
            .len();
        assert_eq!(on_disk, whole, "nothing left past the whole records");
        drop(log);
        let read = read_back(&dir);
        assert_eq!(read.paths, ["big"]);
        assert_eq!(read.entries[0].before_print, print(&big));
        let log = Log::open(&dir, "conv", &read.run, MAX).expect("open");
        assert_eq!(log.load(&read.entries[0].before).expect("load"), big);
        let mut hasher = Hasher::default();
        log.visit(&read.entries[0].before, &mut hasher)
            .expect("visit");
        assert_eq!(hasher.finish(), print(&big));
    }
}
