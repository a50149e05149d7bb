//! The log's tests: records written, read back, torn, over the limit, evicted.

use std::{collections::BTreeMap, io, os::unix::fs::FileExt};

use cap_std::fs::Dir;
use rojos_fs_guard::{Node, PathError, Shape, Visit};

use super::{dir::*, evict::*, format::*, log::*};
use crate::fingerprint::Hasher;

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
fn record(log: &mut Log, paths: Vec<String>, recorded: Vec<(String, Node)>) -> io::Result<bool> {
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
