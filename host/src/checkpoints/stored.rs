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
//! append leaves a torn last record, which reading ignores (the next append overwrites it).
//! One file per run, written by appending, keeps a changing call to one write and at most
//! one sync, and creates one file per run, in one folder per project, instead of folders of
//! replaced manifests and blobs: creating and deleting many small files and folders is what
//! made ext4's inode allocation the hot spot of `rojos-bench` S2 (bench/PROFILE.md). A dropped (evicted) checkpoint is
//! rewritten without its content (temporary file, sync, rename, sync of the folder).
//! docs/api.md "Undo of file changes" describes the layout.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, BufRead, BufReader, Read, Write},
    os::unix::fs::FileExt,
};

use cap_std::fs::{Dir, OpenOptions};
use rojos_fs_guard::Node;
use serde::{Deserialize, Serialize};

/// The ending of a run's log file name.
const LOG: &str = ".log";
/// The log format this host writes and reads.
const VERSION: u32 = 2;
/// The longest record line read; a longer one is damage (a record names paths, not content).
const MAX_LINE: u64 = 64 << 20;

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
            len: 0,
        }
    }

    /// Reads the log called `name` in a project's `checkpoints` folder; `None` when `name`
    /// is not a run's log.
    pub(super) fn read(checkpoints: &Dir, name: &str) -> io::Result<Option<Manifest>> {
        let Some((conversation, run)) = name.strip_suffix(LOG).and_then(|n| n.split_once('.'))
        else {
            return Ok(None);
        };
        let file = checkpoints.open(name)?.into_std();
        Manifest::parse(&file, conversation, run).map(Some)
    }

    /// The file name of the log.
    fn file_name(&self) -> String {
        log_name(&self.conversation, &self.run)
    }

    /// Parses a log up to its last whole record.
    fn parse(file: &File, conversation: &str, run: &str) -> io::Result<Manifest> {
        let size = file.metadata()?.len();
        let mut reader = BufReader::new(file);
        let damaged = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let mut manifest = match next_record(&mut reader, size, 0)? {
            Some((
                Record::Run {
                    version: VERSION,
                    run: named,
                    message,
                    created_at,
                    evicted,
                },
                len,
            )) if named == run => Manifest {
                evicted,
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
        while let Some((record, end)) = next_record(&mut reader, size, manifest.len)? {
            let start = end - record.payload();
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

/// Whether `name` is a log of `conversation`.
pub(super) fn is_log_of(name: &str, conversation: &str) -> bool {
    name.strip_prefix(conversation)
        .is_some_and(|rest| rest.starts_with('.') && rest.ends_with(LOG))
}

/// The record starting at `at` (where `reader` stands) and the offset after it; `None` at
/// the end or at a torn or damaged record (the end of what was written whole).
fn next_record(
    reader: &mut BufReader<&File>,
    size: u64,
    at: u64,
) -> io::Result<Option<(Record, u64)>> {
    let mut line = Vec::new();
    let read = reader
        .by_ref()
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)?;
    if read == 0 || line.last() != Some(&b'\n') {
        return Ok(None);
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
    /// The `checkpoints` folder holding the log, kept open by the log a run creates: its
    /// later calls record there without opening the folder again.
    pub(super) folder: Option<Dir>,
}

impl Log {
    /// Creates the log of the run `manifest` (new, empty) in the project's `checkpoints`
    /// folder, which it keeps, with its first record (not synced).
    pub(super) fn create(checkpoints: Dir, manifest: Manifest) -> io::Result<Log> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create_new(true);
        let file = checkpoints
            .open_with(manifest.file_name(), &options)?
            .into_std();
        let mut log = Log {
            file,
            manifest,
            names_synced: false,
            folder: Some(checkpoints),
        };
        let run = Record::Run {
            version: VERSION,
            run: log.manifest.run.clone(),
            message: log.manifest.message,
            created_at: log.manifest.created_at,
            evicted: false,
        };
        log.append(&run, &[])?;
        Ok(log)
    }

    /// Opens the log of `run` of `conversation` in the project's `checkpoints` folder, for
    /// reading its content and appending.
    pub(super) fn open(checkpoints: &Dir, conversation: &str, run: &str) -> io::Result<Log> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        let file = checkpoints
            .open_with(log_name(conversation, run), &options)?
            .into_std();
        let manifest = Manifest::parse(&file, conversation, run)?;
        Ok(Log {
            file,
            manifest,
            names_synced: true,
            folder: None,
        })
    }

    /// Appends one call's record: the paths it named for the first time (`paths`) and what
    /// the newly recorded paths held, each with its fingerprint. Synced when it holds
    /// anything but absences. Returns whether it was synced.
    pub(super) fn record_call(
        &mut self,
        paths: Vec<String>,
        recorded: Vec<(String, Node, String)>,
    ) -> io::Result<bool> {
        let mut blobs = Vec::new();
        let mut payload = 0;
        let entries: Vec<Entry> = recorded
            .iter()
            .map(|(path, node, print)| Entry {
                path: path.clone(),
                before: stored(node, &mut blobs, &mut payload),
                before_print: print.clone(),
                after: None,
            })
            .collect();
        let holds_content = recorded
            .iter()
            .any(|(_, node, _)| !matches!(node, Node::Absent));
        let record = Record::Call {
            paths,
            entries,
            payload,
        };
        let payload_at = self.append(&record, &blobs)?;
        if holds_content {
            self.file.sync_data()?;
        }
        self.manifest.apply(record, payload_at);
        Ok(holds_content)
    }

    /// Appends every entry's fingerprint after a changing call (not synced); nothing when
    /// they are the ones recorded already.
    pub(super) fn record_after(&mut self, prints: Vec<Option<String>>) -> io::Result<()> {
        if self.manifest.entries.iter().map(|e| &e.after).eq(&prints) {
            return Ok(());
        }
        let record = Record::After { prints };
        self.append(&record, &[])?;
        self.manifest.apply(record, 0);
        Ok(())
    }

    /// Marks the run undone (synced).
    pub(super) fn record_undone(&mut self) -> io::Result<()> {
        self.append(&Record::Undone, &[])?;
        self.file.sync_data()?;
        self.manifest.apply(Record::Undone, 0);
        Ok(())
    }

    /// Writes `record` and its file content after the last whole record; returns where the
    /// content starts.
    fn append(&mut self, record: &Record, blobs: &[&[u8]]) -> io::Result<u64> {
        let line = record.line()?;
        let mut at = self.manifest.len;
        self.file.write_all_at(&line, at)?;
        at += line.len() as u64;
        let payload_at = at;
        for blob in blobs {
            self.file.write_all_at(blob, at)?;
            at += blob.len() as u64;
        }
        self.manifest.len = at;
        Ok(payload_at)
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

/// Drops the content of the run `manifest` in the project's `checkpoints` folder (it stays
/// listed, as evicted): the log is replaced by one without content, atomically.
pub(super) fn evict(checkpoints: &Dir, manifest: &mut Manifest) -> io::Result<()> {
    let name = manifest.file_name();
    let temp = format!("{name}.tmp");
    let mut file = checkpoints.create(&temp)?;
    let mut entries = manifest.entries.clone();
    for entry in &mut entries {
        entry.before.drop_content();
    }
    let records = [
        Record::Run {
            version: VERSION,
            run: manifest.run.clone(),
            message: manifest.message,
            created_at: manifest.created_at,
            evicted: true,
        },
        Record::Call {
            paths: manifest.paths.clone(),
            entries,
            payload: 0,
        },
        Record::After {
            prints: manifest.entries.iter().map(|e| e.after.clone()).collect(),
        },
    ];
    for record in records
        .iter()
        .chain(manifest.undone.then_some(&Record::Undone))
    {
        file.write_all(&record.line()?)?;
    }
    file.sync_all()?;
    checkpoints.rename(&temp, checkpoints, name)?;
    sync_dir(checkpoints)?;
    manifest.evicted = true;
    manifest.bytes = 0;
    Ok(())
}

/// `node` as a record stores it: each file's bytes pushed on `blobs`, its offset counted
/// from the record's content start (`payload` so far).
fn stored<'a>(node: &'a Node, blobs: &mut Vec<&'a [u8]>, payload: &mut u64) -> StoredNode {
    match node {
        Node::Absent => StoredNode::Absent,
        Node::File { mode, bytes } => {
            let at = *payload;
            *payload += bytes.len() as u64;
            blobs.push(bytes);
            StoredNode::File {
                mode: *mode,
                at,
                size: bytes.len() as u64,
            }
        }
        Node::Folder { mode, entries } => StoredNode::Folder {
            mode: *mode,
            entries: entries
                .iter()
                .map(|(name, entry)| (name.clone(), stored(entry, blobs, payload)))
                .collect(),
        },
        Node::Symlink { target } => StoredNode::Symlink {
            target: target.clone(),
        },
    }
}

impl StoredNode {
    /// Makes the files' offsets count from the log's start (`base`: where the record's
    /// content starts).
    fn shift(&mut self, base: u64) {
        match self {
            StoredNode::File { at, .. } => *at += base,
            StoredNode::Folder { entries, .. } => entries.values_mut().for_each(|e| e.shift(base)),
            StoredNode::Absent | StoredNode::Symlink { .. } => {}
        }
    }

    /// Forgets where the files' bytes were (an evicted log has none).
    fn drop_content(&mut self) {
        match self {
            StoredNode::File { at, .. } => *at = 0,
            StoredNode::Folder { entries, .. } => entries.values_mut().for_each(Self::drop_content),
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
        Manifest::read(dir, "conv.0000000000001-0.log")
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
        let mut log = Log::create(dir.try_clone().unwrap(), run()).expect("create");
        log.record_call(
            vec!["a".into()],
            vec![("a".into(), Node::Absent, "p".into())],
        )
        .expect("record");
        let len = log.manifest.len;
        log.record_after(vec![Some("p".into())]).expect("same");
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
        let mut log = Log::create(dir.try_clone().unwrap(), run()).expect("create");
        let tree = Node::Folder {
            mode: 0o755,
            entries: BTreeMap::from([("a".into(), file(b"one")), ("b".into(), file(b"two!"))]),
        };
        assert!(!log
            .record_call(
                vec!["new".into()],
                vec![("new".into(), Node::Absent, "p0".into())]
            )
            .expect("absence"));
        assert!(log
            .record_call(
                vec!["docs".into()],
                vec![("docs".into(), tree.clone(), "p1".into())]
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
        let log = Log::open(&dir, "conv", &read.run).expect("open");
        assert_eq!(log.load(&read.entries[1].before).expect("load"), tree);
        assert!(Manifest::read(&dir, "notes.txt").expect("skip").is_none());
        assert!(Manifest::read(&dir, "conv.log").expect("skip").is_none());
        assert!(is_log_of("conv.0000000000001-0.log", "conv"));
        assert!(!is_log_of("conv2.0000000000001-0.log", "conv"));
        assert!(!is_log_of("conv.0000000000001-0.log.tmp", "conv"));
    }

    #[test]
    fn a_torn_last_record_is_ignored_and_overwritten_by_the_next() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run()).expect("create");
        log.record_call(
            vec!["a".into()],
            vec![("a".into(), file(b"kept"), "p".into())],
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

        let mut log = Log::open(&dir, "conv", "0000000000001-0").expect("open");
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
    fn an_evicted_log_keeps_its_listing_but_no_content() {
        let (_temp, dir) = folder();
        let mut log = Log::create(dir.try_clone().unwrap(), run()).expect("create");
        log.record_call(
            vec!["a".into()],
            vec![("a".into(), file(b"content"), "p".into())],
        )
        .expect("record");
        let mut manifest = log.manifest.clone();
        drop(log);
        evict(&dir, &mut manifest).expect("evict");
        let read = read_back(&dir);
        assert!(read.evicted);
        assert_eq!(read.bytes, 0);
        assert_eq!(read.paths, ["a"]);
        assert_eq!(read.entries[0].before_print, "p");
        let size = dir
            .metadata("conv.0000000000001-0.log")
            .expect("stat")
            .len();
        assert_eq!(size, read.len, "no content left in the file");
        assert!(dir.metadata("conv.0000000000001-0.log.tmp").is_err());
    }
}
