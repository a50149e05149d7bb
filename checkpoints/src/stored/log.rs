//! [`Log`]: a run's log open for appending records and reading content back, and
//! [`prepare`], a call's record made and measured before anything is written.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, Write},
    os::unix::fs::FileExt,
};

use cap_std::fs::{Dir, OpenOptions};
use rojos_fs_guard::{Node, PathError, ProjectDir, Shape, Visit};

use super::{
    copy::{stored, Copy, Part},
    format::{log_name, Entry, Manifest, Record, StoredNode, VERSION},
};
use crate::fingerprint::{self, Hasher};

/// A run's log, open for appending and reading content.
#[derive(Debug)]
pub(crate) struct Log {
    pub(super) file: File,
    /// What the log says so far.
    pub(crate) manifest: Manifest,
    /// Whether the names on the way to the log are known to be synced.
    pub(crate) names_synced: bool,
    /// The project's `checkpoints` folder holding the log and its head (a run's later calls
    /// record there without opening the folder again).
    pub(crate) folder: Dir,
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
pub(crate) struct Pending {
    record: Record,
    /// The length of its line.
    line_len: u64,
    /// Each recorded path, what it held, and where its content starts in the record's.
    copies: Vec<(String, Shape, u64)>,
    holds_content: bool,
}

impl Pending {
    /// The bytes it takes in the log: its line (names and entries) and the files' content.
    pub(crate) fn size(&self) -> u64 {
        self.line_len + self.record.payload()
    }

    /// The length of its line (names and entries).
    pub(crate) fn line_len(&self) -> u64 {
        self.line_len
    }
}

/// Where a recording reads the content it copies into the log: the project's files.
pub(crate) trait Source {
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
pub(crate) enum CopyError {
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
pub(crate) enum RecordError {
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
    pub(crate) fn create(checkpoints: Dir, manifest: Manifest, max_line: u64) -> io::Result<Log> {
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
    pub(crate) fn open(
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
            head_len: crate::head::len(checkpoints, conversation, run),
            max_line,
        })
    }

    /// The bytes the log and its head take on disk.
    pub(crate) fn disk(&self) -> u64 {
        self.file_len.max(self.manifest.len) + self.head_len
    }

    /// Appends one call's record made by [`prepare`], its content copied from `source` in
    /// parts of [`CHUNK`] bytes and fingerprinted on the way: first a placeholder line (not
    /// a record: a crash leaves a torn end), then the content, then the line with the
    /// fingerprints. Synced when it holds anything but absences. Returns whether it was
    /// synced. On an error the log is left as it was (its whole records).
    pub(crate) fn record_call(
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
    pub(crate) fn record_after(&mut self, prints: Vec<Option<String>>) -> io::Result<()> {
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
    pub(crate) fn record_undone(&mut self) -> io::Result<()> {
        self.append(&Record::Undone)?;
        self.file.sync_data()?;
        self.manifest.apply(Record::Undone, 0);
        self.write_head();
        Ok(())
    }

    /// Writes the log's head beside it (what listing reads instead of the log); a head not
    /// written is only slower listing (the log is read instead), so a failure is logged.
    fn write_head(&mut self) {
        match crate::head::write(&self.folder, &self.manifest.head()) {
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
    pub(crate) fn visit(&self, stored: &StoredNode, visit: &mut dyn Visit) -> io::Result<()> {
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
    pub(crate) fn copy_to(&self, at: u64, size: u64, out: &mut dyn Write) -> io::Result<()> {
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
    pub(crate) fn load(&self, stored: &StoredNode) -> io::Result<Node> {
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
pub(crate) fn prepare(
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
