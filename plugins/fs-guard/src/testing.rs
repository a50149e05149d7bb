//! Test world for file tools (feature `testing`): a temp folder holding the project root
//! `storage/p1/root/`, a sibling project, a sibling-prefix folder and an outside folder, where
//! every file outside the root holds [`LEAK_MARKER`], plus helpers to plant links, FIFOs,
//! devices and big files, and to check that nothing leaked or changed outside the root.
//! It builds the world with `std::fs`; the code under test must not.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use rojos_plugin_api::{CallContext, ErrorKind, Limits, Tool, ToolError};
use rustix::fs::{FileType, Mode, RenameFlags, CWD};

use crate::ProjectDir;

/// Every file outside p1's root contains this string, and some outside names do too, so any
/// leak of content or listing shows up in a result.
pub const LEAK_MARKER: &str = "LEAK-MARKER-7f3a";

/// The content of `swap/secret.txt` in [`Fixture::start_race`].
pub const RACE_INSIDE: &str = "inside secret\n";

/// Files placed in the root by [`Fixture::new`]: `hello.txt` holds `hello`,
/// `sub/inner.txt` holds `inner`, `sub/deeper/` is an empty folder.
pub const ROOT_FILES: &[(&str, &str)] = &[("hello.txt", "hello"), ("sub/inner.txt", "inner")];

const OUTSIDE: ErrorKind = ErrorKind::OUTSIDE_ROOT;
const REFUSED: ErrorKind = ErrorKind::REFUSED;
const NOT_FOUND: ErrorKind = ErrorKind::NOT_FOUND;
const INVALID: ErrorKind = ErrorKind::INVALID_ARGUMENTS;

/// Hostile paths for a tool that reads an existing name (after [`Fixture::plant_links`]),
/// with the error kind each must give: absolute, `..` in every position, sibling prefix,
/// other project, symlinks leading out, loops, and literal look-alikes that stay inside.
/// `a/../../x` is not found: the kernel resolves `a` first, and it does not exist.
pub const READ_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/etc/passwd", OUTSIDE),
    ("/", OUTSIDE),
    ("..", OUTSIDE),
    ("../x", OUTSIDE),
    ("./..", OUTSIDE),
    ("sub/../../x", OUTSIDE),
    ("sub/deeper/../../../x", OUTSIDE),
    ("../root/hello.txt", OUTSIDE),
    ("../root-evil/x", OUTSIDE),
    ("../../p2/root/x", OUTSIDE),
    ("../../../outside/secret.txt", OUTSIDE),
    ("abs-file", OUTSIDE),
    ("abs-dir/secret.txt", OUTSIDE),
    ("rel-file", OUTSIDE),
    ("rel-dir/secret.txt", OUTSIDE),
    ("rel-dir/dir/secret.txt", OUTSIDE),
    ("chain-a/secret.txt", OUTSIDE),
    ("proc-root/etc/passwd", OUTSIDE),
    ("proc-root", OUTSIDE),
    ("dangling-out", OUTSIDE),
    ("dangling-abs", OUTSIDE),
    ("evil/x", OUTSIDE),
    ("other-project/x", OUTSIDE),
    ("abs-in", OUTSIDE),
    ("sub/up-dir/../x", OUTSIDE),
    ("C:\\x", OUTSIDE),
    ("loop-a", REFUSED),
    ("self-loop", REFUSED),
    ("dangling-in", NOT_FOUND),
    ("a/../../x", NOT_FOUND),
    ("~/x", NOT_FOUND),
    ("%2e%2e/x", NOT_FOUND),
    ("\u{2025}/x", NOT_FOUND),
    ("\u{ff0e}\u{ff0e}/x", NOT_FOUND),
    ("..\u{2215}x", NOT_FOUND),
    ("..\\x", INVALID),
];

/// Hostile folder paths for `list_files` (after [`Fixture::plant_links`]).
pub const LIST_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/", OUTSIDE),
    ("/etc", OUTSIDE),
    ("..", OUTSIDE),
    ("./..", OUTSIDE),
    ("sub/../..", OUTSIDE),
    ("../root", OUTSIDE),
    ("../root-evil", OUTSIDE),
    ("../../p2/root", OUTSIDE),
    ("abs-dir", OUTSIDE),
    ("rel-dir", OUTSIDE),
    ("chain-a", OUTSIDE),
    ("proc-root", OUTSIDE),
    ("evil", OUTSIDE),
    ("other-project", OUTSIDE),
    ("sub/up-dir/..", OUTSIDE),
    ("loop-a", REFUSED),
    ("hello.txt", REFUSED),
    ("", INVALID),
];

/// Hostile paths for `write_text_content` (after [`Fixture::plant_links`]): a symlink as
/// the last name is refused (never written through), one on the way out is outside.
pub const WRITE_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/tmp/rojos-escape.txt", OUTSIDE),
    ("../x", OUTSIDE),
    ("../new.txt", OUTSIDE),
    ("./../x", OUTSIDE),
    ("sub/../../x", OUTSIDE),
    ("../root/new.txt", OUTSIDE),
    ("../root-evil/x", OUTSIDE),
    ("../root-evil/new/x", OUTSIDE),
    ("../../p2/root/x", OUTSIDE),
    ("abs-dir/new.txt", OUTSIDE),
    ("abs-dir/secret.txt", OUTSIDE),
    ("rel-dir/new.txt", OUTSIDE),
    ("rel-dir/newdir/new.txt", OUTSIDE),
    ("chain-a/new.txt", OUTSIDE),
    ("proc-root/tmp/rojos-escape.txt", OUTSIDE),
    ("evil/x", OUTSIDE),
    ("other-project/x", OUTSIDE),
    ("C:\\x", OUTSIDE),
    ("rel-file", REFUSED),
    ("abs-file", REFUSED),
    ("dangling-out", REFUSED),
    ("dangling-abs", REFUSED),
    ("abs-in", REFUSED),
    ("loop-a", REFUSED),
    ("loop-a/x", REFUSED),
    ("a\\b", INVALID),
    ("new\u{202e}name", INVALID),
];

/// Hostile paths for `create_directory` (after [`Fixture::plant_links`]).
pub const CREATE_DIR_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/tmp/rojos-escape-dir", OUTSIDE),
    ("..", OUTSIDE),
    ("../newdir", OUTSIDE),
    ("../root-evil/newdir", OUTSIDE),
    ("../../p2/root/newdir", OUTSIDE),
    ("sub/../../newdir", OUTSIDE),
    ("abs-dir/newdir", OUTSIDE),
    ("rel-dir/newdir", OUTSIDE),
    ("rel-dir/a/b/c", OUTSIDE),
    ("chain-a/newdir", OUTSIDE),
    ("evil/newdir", OUTSIDE),
    ("proc-root/tmp/rojos-escape-dir", OUTSIDE),
    ("rel-dir", OUTSIDE),
    ("dangling-out", OUTSIDE),
    ("dangling-abs", OUTSIDE),
    ("dangling-in", REFUSED),
    ("hello.txt", REFUSED),
    ("hello.txt/x", REFUSED),
    ("bidi\u{202e}dir", INVALID),
];

/// Hostile paths for deleting (and for the source of a move), after
/// [`Fixture::plant_links`], with the error kind each must give: absolute, `..` in every
/// position, sibling prefix, other project, symlinks leading out as a parent component, a
/// loop, and the root itself, also as paths that resolve to it (`sub/..`, `in-dir/..`).
/// A symlink as the last name is not in the list: it is deleted (moved) as a link.
pub const DELETE_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/etc/passwd", OUTSIDE),
    ("/", OUTSIDE),
    ("..", OUTSIDE),
    ("../", OUTSIDE),
    ("../x", OUTSIDE),
    ("./..", OUTSIDE),
    ("sub/../../x", OUTSIDE),
    ("sub/deeper/../../../x", OUTSIDE),
    ("../root", OUTSIDE),
    ("../root/hello.txt", OUTSIDE),
    ("../root-evil/x", OUTSIDE),
    ("../../p2/root/x", OUTSIDE),
    ("../../p2/root", OUTSIDE),
    ("abs-dir/secret.txt", OUTSIDE),
    ("abs-dir/dir", OUTSIDE),
    ("rel-dir/secret.txt", OUTSIDE),
    ("rel-dir/dir/", OUTSIDE),
    ("rel-dir/dir/x", OUTSIDE),
    ("chain-a/secret.txt", OUTSIDE),
    ("proc-root/tmp", OUTSIDE),
    ("evil/x", OUTSIDE),
    ("other-project/x", OUTSIDE),
    ("sub/up-dir/../x", OUTSIDE),
    ("sub/up-dir/..", OUTSIDE),
    ("C:\\x", OUTSIDE),
    (".", REFUSED),
    ("./", REFUSED),
    (".//.", REFUSED),
    ("sub/..", REFUSED),
    ("sub/deeper/../..", REFUSED),
    ("in-dir/..", REFUSED),
    ("sub/up-dir/.", REFUSED),
    ("sub/up-dir/", REFUSED),
    ("loop-a/x", REFUSED),
    ("hello.txt/", REFUSED),
    ("hello.txt/x", REFUSED),
    ("dangling-in/x", NOT_FOUND),
    ("missing", NOT_FOUND),
    ("a/../x", NOT_FOUND),
    ("a\\b", INVALID),
    ("", INVALID),
];

/// Hostile destinations for moving `hello.txt` or `sub` (after [`Fixture::plant_links`]):
/// outside through every escape, and every existing name, which a move never replaces (a
/// file, a folder, a link, a dangling link whose target would be created outside).
pub const MOVE_DEST_ESCAPES: &[(&str, ErrorKind)] = &[
    ("/tmp/rojos-escape-moved", OUTSIDE),
    ("..", OUTSIDE),
    ("../moved", OUTSIDE),
    ("./../moved", OUTSIDE),
    ("sub/../../moved", OUTSIDE),
    ("../root-evil/moved", OUTSIDE),
    ("../../p2/root/moved", OUTSIDE),
    ("abs-dir/moved", OUTSIDE),
    ("abs-dir/dir/moved", OUTSIDE),
    ("rel-dir/moved", OUTSIDE),
    ("rel-dir/dir/moved", OUTSIDE),
    ("chain-a/moved", OUTSIDE),
    ("proc-root/tmp/rojos-escape-moved", OUTSIDE),
    ("evil/moved", OUTSIDE),
    ("other-project/moved", OUTSIDE),
    ("sub/up-dir/../moved", OUTSIDE),
    ("C:\\moved", OUTSIDE),
    (".", REFUSED),
    ("sub/..", REFUSED),
    ("sub/deeper", REFUSED),
    ("sub/inner.txt", REFUSED),
    ("in-file", REFUSED),
    ("in-dir", REFUSED),
    ("rel-dir", REFUSED),
    ("abs-file", REFUSED),
    ("dangling-out", REFUSED),
    ("dangling-abs", REFUSED),
    ("dangling-in", REFUSED),
    ("loop-a", REFUSED),
    ("loop-a/moved", REFUSED),
    ("missing/moved", REFUSED),
    ("hello.txt/moved", REFUSED),
    ("a\\b", INVALID),
    ("new\u{202e}name", INVALID),
    ("", INVALID),
];

/// Arguments that are not `{"path": string}`, each with a piece of the message it must give
/// (all `invalid_arguments`): missing, wrong types, extra keys, not JSON, not an object,
/// duplicate keys, deep nesting, a lone surrogate.
pub fn bad_path_arguments() -> Vec<(String, &'static str)> {
    let deep = format!("{{\"path\":{}{}}}", "[".repeat(5000), "]".repeat(5000));
    let deep_extra = format!(
        "{{\"path\":\"a\",\"x\":{}{}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    [
        ("{}", "missing field `path`"),
        (r#"{"path":1}"#, "invalid type: integer"),
        (r#"{"path":1.5}"#, "invalid type: floating point"),
        (r#"{"path":true}"#, "invalid type: boolean"),
        (r#"{"path":["a"]}"#, "invalid type: sequence"),
        (r#"{"path":null}"#, "invalid type: null"),
        (r#"{"path":{"a":1}}"#, "invalid type: map"),
        (r#"{"path":"a","extra":1}"#, "unknown field `extra`"),
        (r#"{"Path":"a"}"#, "unknown field `Path`"),
        (r#"{"path":"a","path":"b"}"#, "duplicate field `path`"),
        (r#"{"path":"\ud800"}"#, "hex escape"),
        (r#"{"path":"\ud800\u0041"}"#, "surrogate"),
        (r#"{"path":"\udc00"}"#, "surrogate"),
        (r#"{"path":"a""#, "EOF while parsing"),
        ("", "expected a JSON object"),
        ("  \n ", "expected a JSON object"),
        ("not json", "expected a JSON object"),
        (r#"["hello.txt"]"#, "expected a JSON object"),
        (r#""hello.txt""#, "expected a JSON object"),
        ("null", "expected a JSON object"),
        ("42", "expected a JSON object"),
        (&deep, "invalid type: sequence"),
        (&deep_extra, "unknown field `x`"),
    ]
    .into_iter()
    .map(|(args, expected)| (args.to_owned(), expected))
    .collect()
}

/// Asserts that a tool result is an error of `kind` whose message names no outside target,
/// holds no leak marker and no absolute path; returns the message.
pub fn assert_refused(
    fx: &Fixture,
    path: &str,
    result: Result<String, ToolError>,
    kind: &ErrorKind,
) -> String {
    let error = match result {
        Ok(text) => {
            fx.assert_clean(&text);
            panic!("{path:?} was not refused: {text}");
        }
        Err(error) => error,
    };
    assert_eq!(&error.kind, kind, "{path:?}: {}", error.message);
    fx.assert_clean(&error.message);
    for target in ["../../..", "/proc", "nonexistent-rojos", "/etc", "/dev"] {
        assert!(
            path.contains(target) || !error.message.contains(target),
            "{path:?}: the message names a link target: {}",
            error.message
        );
    }
    error.message
}

/// Whether anything exists at the absolute host path `path` (to check that an escape
/// attempt such as `/tmp/rojos-escape.txt` created nothing).
pub fn host_path_exists(path: &str) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Calls tool `T` the way the host does: a real root descriptor in the context, and the
/// arguments as JSON text.
pub fn call_tool<T: Tool>(fx: &Fixture, args: &str) -> Result<String, ToolError> {
    let ctx = fx.context();
    T::call(ctx.ctx(), args)
}

/// The temp world. Dropping it removes everything.
#[derive(Debug)]
pub struct Fixture {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

/// A [`CallContext`] whose `root_fd` is a real open descriptor of the root, kept open as long
/// as this value lives (as the host does during a call).
#[derive(Debug)]
pub struct TestContext {
    ctx: CallContext,
    _root: OwnedFd,
}

impl TestContext {
    /// The context to pass to `Tool::call`.
    pub fn ctx(&self) -> &CallContext {
        &self.ctx
    }

    /// The same context, telling the tool it may only create at `paths`
    /// (`CallContext::create_only`).
    #[must_use]
    pub fn create_only(mut self, paths: &[&str]) -> Self {
        self.ctx.create_only = paths.iter().map(|p| (*p).to_owned()).collect();
        self
    }
}

/// What one name outside the root was when [`Fixture::snapshot_outside`] looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A regular file: its bytes and mode.
    File(Vec<u8>, u32),
    /// A folder.
    Dir,
    /// A symlink and its target.
    Link(PathBuf),
    /// Anything else.
    Other,
}

/// Everything outside the root, by path relative to the fixture's base.
pub type Snapshot = BTreeMap<PathBuf, Seen>;

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// Builds the world in the system's temp folder (panics on failure: it is test code).
    pub fn new() -> Self {
        Self::new_in(&std::env::temp_dir())
    }

    /// Builds the world in a new folder inside `parent`, e.g. on another file system.
    pub fn new_in(parent: &Path) -> Self {
        let temp = tempfile::Builder::new()
            .prefix("rojos-fs-guard-")
            .tempdir_in(parent)
            .expect("create temp dir");
        let base = temp.path().canonicalize().expect("canonical temp dir");
        let root = base.join("storage/p1/root");
        let fixture = Fixture {
            _temp: temp,
            base,
            root,
        };
        fs::create_dir_all(&fixture.root).expect("create root");
        for (rel, text) in ROOT_FILES {
            fixture.write(rel, text.as_bytes());
        }
        fixture.mkdir("sub/deeper");
        for folder in [
            "",
            "storage",
            "storage/p1",
            "storage/p1/root-evil",
            "storage/p2",
            "storage/p2/root",
            "outside",
            "outside/dir",
        ] {
            let folder = fixture.base.join(folder);
            fs::create_dir_all(&folder).expect("create outside folder");
            for name in ["x", "secret.txt", &format!("{LEAK_MARKER}.txt")] {
                fs::write(folder.join(name), format!("{LEAK_MARKER} in {name}\n"))
                    .expect("write marker file");
            }
        }
        fixture
    }

    /// The canonical absolute path of the temp world.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The absolute path of p1's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path of `outside/`, a sibling of `storage/`.
    pub fn outside(&self) -> PathBuf {
        self.base.join("outside")
    }

    /// The absolute path of `rel` under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file under the root, creating its parents.
    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parents");
        }
        fs::write(path, bytes).expect("write fixture file");
    }

    /// Reads a file under the root.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).expect("read fixture file")
    }

    /// Whether anything (even a dangling link) has the name `rel` under the root.
    pub fn exists(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.path(rel)).is_ok()
    }

    /// Whether `rel` under the root is a folder (following links, as the test world sees it).
    pub fn is_dir(&self, rel: &str) -> bool {
        self.path(rel).is_dir()
    }

    /// Writes a file whose name under the root is any bytes (e.g. not UTF-8).
    pub fn write_raw_name(&self, name: &[u8], bytes: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        fs::write(self.root.join(std::ffi::OsStr::from_bytes(name)), bytes).expect("write");
    }

    /// An open descriptor of a file under the root (for a context whose root is not a folder).
    pub fn open_fd(&self, rel: &str) -> OwnedFd {
        fs::File::open(self.path(rel))
            .expect("open fixture file")
            .into()
    }

    /// Reads `rel` the naive way (`std::fs`, following every link), as a control in race
    /// tests: it shows that the race really exposes outside content to unconfined code.
    pub fn naive_read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    /// Creates a folder (and parents) under the root.
    pub fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).expect("create fixture folder");
    }

    /// Plants a symlink at `rel` whose target is `target`, verbatim (relative or absolute).
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, self.path(rel)).expect("plant symlink");
    }

    /// Plants a FIFO at `rel`.
    pub fn fifo(&self, rel: &str) {
        rustix::fs::mknodat(CWD, self.path(rel), FileType::Fifo, Mode::from(0o644), 0)
            .expect("plant fifo");
    }

    /// Plants a character device like `/dev/null` (1, 3) at `rel`; false if not allowed
    /// (not root, or a container without `CAP_MKNOD`).
    pub fn char_device(&self, rel: &str) -> bool {
        let dev = rustix::fs::makedev(1, 3);
        rustix::fs::mknodat(
            CWD,
            self.path(rel),
            FileType::CharacterDevice,
            Mode::from(0o666),
            dev,
        )
        .is_ok()
    }

    /// Creates a sparse file of `len` bytes (all zeros) at `rel`.
    pub fn sized_file(&self, rel: &str, len: u64) {
        let file = fs::File::create(self.path(rel)).expect("create sized file");
        file.set_len(len).expect("set file length");
    }

    /// Sets the permission bits of `rel`.
    pub fn chmod(&self, rel: &str, mode: u32) {
        fs::set_permissions(self.path(rel), fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// The permission bits of `rel` (not following a final symlink).
    pub fn mode(&self, rel: &str) -> u32 {
        fs::symlink_metadata(self.path(rel))
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    }

    /// Plants at `rel` a hard link to `outside/<outside_rel>`.
    pub fn hard_link_outside(&self, rel: &str, outside_rel: &str) {
        fs::hard_link(self.outside().join(outside_rel), self.path(rel)).expect("hard link");
    }

    /// The names in a folder under the root, sorted.
    pub fn names(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path(rel))
            .expect("read fixture folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The root as a [`ProjectDir`] with default limits.
    pub fn project_dir(&self) -> ProjectDir {
        self.project_dir_with(Limits::default())
    }

    /// The root as a [`ProjectDir`] with `limits`.
    pub fn project_dir_with(&self, limits: Limits) -> ProjectDir {
        let dir = Dir::open_ambient_dir(&self.root, ambient_authority()).expect("open root");
        ProjectDir::new(dir, limits)
    }

    /// A call context for p1 with default limits and a real root descriptor.
    pub fn context(&self) -> TestContext {
        self.context_with(Limits::default())
    }

    /// A call context for p1 with `limits` and a real root descriptor.
    pub fn context_with(&self, limits: Limits) -> TestContext {
        let root: OwnedFd = fs::File::open(&self.root).expect("open root").into();
        let ctx = CallContext {
            project_id: "p1".to_owned(),
            root_fd: root.as_raw_fd(),
            limits,
            create_only: Vec::new(),
        };
        TestContext { ctx, _root: root }
    }

    /// Panics if `text` (a result or an error message) holds the leak marker or the temp
    /// world's absolute path.
    pub fn assert_clean(&self, text: &str) {
        assert!(!text.contains(LEAK_MARKER), "leak marker in result: {text}");
        let base = self.base.to_string_lossy();
        assert!(
            !text.contains(&*base),
            "absolute storage path in result: {text}"
        );
        let temp = std::env::temp_dir();
        let temp = temp.to_string_lossy();
        let temp = temp.trim_end_matches('/');
        assert!(
            !text.contains(&format!("{temp}/rojos-fs-guard-")),
            "temp path in result: {text}"
        );
    }

    /// Everything outside p1's root: each name with its content, mode or link target.
    pub fn snapshot_outside(&self) -> Snapshot {
        let mut seen = Snapshot::new();
        self.walk(&self.base, &mut seen);
        seen
    }

    fn walk(&self, folder: &Path, seen: &mut Snapshot) {
        for entry in fs::read_dir(folder).expect("read folder") {
            let path = entry.expect("entry").path();
            if path == self.root {
                continue;
            }
            let meta = fs::symlink_metadata(&path).expect("stat");
            let rel = path
                .strip_prefix(&self.base)
                .expect("under base")
                .to_owned();
            let what = if meta.is_dir() {
                self.walk(&path, seen);
                Seen::Dir
            } else if meta.is_file() {
                Seen::File(fs::read(&path).expect("read"), meta.permissions().mode())
            } else if meta.file_type().is_symlink() {
                Seen::Link(fs::read_link(&path).expect("readlink"))
            } else {
                Seen::Other
            };
            seen.insert(rel, what);
        }
    }

    /// Panics if anything outside the root was created, changed or removed since `before`.
    pub fn assert_outside_unchanged(&self, before: &Snapshot) {
        let now = self.snapshot_outside();
        assert!(
            now == *before,
            "outside the root changed:\nbefore {before:?}\nnow {now:?}"
        );
    }

    /// Plants the standard links in the root. Leading out: `abs-file`, `abs-dir` (absolute),
    /// `rel-file`, `rel-dir` (relative), `chain-a` → `chain-b` → `rel-dir`, `proc-root` →
    /// `/proc/self/root`, `dangling-out` (relative, to a missing outside name),
    /// `dangling-abs`, `evil` → `../root-evil`, `other-project` → `../../p2/root`, `abs-in`
    /// (absolute, to `hello.txt`: refused too). Loops: `loop-a` ↔ `loop-b`, `self-loop`.
    /// Inside: `in-file` → `hello.txt`, `in-dir` → `sub`, `in-chain` → `in-dir/inner.txt`,
    /// `sub/up` → `../hello.txt`, `sub/up-dir` → `..`, `dangling-in` → `missing.txt`.
    pub fn plant_links(&self) {
        let out = self.outside();
        self.symlink("abs-file", out.join("secret.txt"));
        self.symlink("abs-dir", &out);
        self.symlink("rel-file", "../../../outside/secret.txt");
        self.symlink("rel-dir", "../../../outside");
        self.symlink("chain-a", "chain-b");
        self.symlink("chain-b", "rel-dir");
        self.symlink("proc-root", "/proc/self/root");
        self.symlink("dangling-out", "../../../outside/new.txt");
        self.symlink("dangling-abs", "/nonexistent-rojos-dir/new.txt");
        self.symlink("evil", "../root-evil");
        self.symlink("other-project", "../../p2/root");
        self.symlink("abs-in", self.path("hello.txt"));
        self.symlink("loop-a", "loop-b");
        self.symlink("loop-b", "loop-a");
        self.symlink("self-loop", "self-loop");
        self.symlink("in-file", "hello.txt");
        self.symlink("in-dir", "sub");
        self.symlink("in-chain", "in-dir/inner.txt");
        self.symlink("sub/up", "../hello.txt");
        self.symlink("sub/up-dir", "..");
        self.symlink("dangling-in", "missing.txt");
    }

    /// Plants `swap/secret.txt` (text [`RACE_INSIDE`]) and `swap/inside-only.txt` for a race,
    /// and starts swapping `swap` with a relative symlink to `outside/`, whose `secret.txt`
    /// holds the leak marker. Call the tool on `swap/secret.txt` or `swap` meanwhile.
    pub fn start_race(&self) -> Swapper {
        self.write("swap/secret.txt", RACE_INSIDE.as_bytes());
        self.write("swap/inside-only.txt", b"inside only\n");
        self.start_swapper("swap", "../../../outside")
    }

    /// Starts a thread that swaps two existing names under the root again and again with
    /// `renameat2(RENAME_EXCHANGE)`, until [`Swapper::stop`].
    pub fn start_exchange(&self, a: &str, b: &str) -> Swapper {
        self.exchange_thread(a, b, false)
    }

    /// Like [`Fixture::start_exchange`], but a failed exchange (a name is gone, e.g. deleted)
    /// is only skipped, and [`Swapper::pause`] can stop the swapping for a while.
    pub fn start_loose_exchange(&self, a: &str, b: &str) -> Swapper {
        self.exchange_thread(a, b, true)
    }

    fn exchange_thread(&self, a: &str, b: &str, loose: bool) -> Swapper {
        let (a, b) = (self.path(a), self.path(b));
        let state = Arc::new(SwapState::default());
        let handle = {
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                while !state.stop.load(Ordering::SeqCst) {
                    if state.paused.load(Ordering::SeqCst) {
                        state.parked.store(true, Ordering::SeqCst);
                        while state.paused.load(Ordering::SeqCst)
                            && !state.stop.load(Ordering::SeqCst)
                        {
                            std::thread::yield_now();
                        }
                        state.parked.store(false, Ordering::SeqCst);
                        continue;
                    }
                    match rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE) {
                        Ok(()) => {
                            state.flips.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if !loose => panic!("exchange names: {e}"),
                        Err(_) => std::thread::yield_now(),
                    }
                }
            })
        };
        Swapper {
            state,
            handle: Some(handle),
        }
    }

    /// Recursively deletes `rel` the naive way (`std::fs`, by path: `lstat`, then list and
    /// delete by path), as a control in race tests: a folder swapped for a symlink between
    /// the `lstat` and the listing makes it delete what the link points to.
    pub fn naive_remove_tree(&self, rel: &str) {
        fn remove(path: &Path) {
            match fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => {
                    if let Ok(entries) = fs::read_dir(path) {
                        for entry in entries.flatten() {
                            remove(&entry.path());
                        }
                    }
                    let _ = fs::remove_dir(path);
                }
                Ok(_) => {
                    let _ = fs::remove_file(path);
                }
                Err(_) => {}
            }
        }
        remove(&self.path(rel));
    }

    /// Races a recursive delete against a concurrent swap, `rounds` times: each round plants
    /// `victim/a/` (files named like the outside ones, a subfolder, twenty more files) and
    /// `victim/a.swap-link`, a relative symlink to `outside/`, lets a thread exchange the two
    /// names again and again, and calls `delete` (which should delete `victim`). Then it
    /// checks that the files in `outside/` are all still there. Stops early at the first
    /// round that lost one if `stop_at_loss`.
    pub fn race_tree_delete(
        &self,
        rounds: usize,
        stop_at_loss: bool,
        mut delete: impl FnMut(&Fixture),
    ) -> TreeRace {
        let canaries =
            ["x", "secret.txt", "dir/x", "dir/secret.txt"].map(|name| self.outside().join(name));
        self.mkdir("victim");
        let swapper = self.start_loose_exchange("victim/a", "victim/a.swap-link");
        let mut race = TreeRace::default();
        for _ in 0..rounds {
            swapper.pause();
            let victim = self.path("victim");
            // Nothing races now, and remove_dir_all never follows links.
            let _ = fs::remove_dir_all(&victim);
            for name in ["x", "secret.txt", "dir/x", "dir/secret.txt"] {
                self.write(&format!("victim/a/{name}"), b"inside\n");
            }
            for i in 0..20 {
                self.write(&format!("victim/a/more/f{i}"), b"inside\n");
            }
            self.symlink("victim/a.swap-link", "../../../../outside");
            swapper.resume();
            delete(self);
            race.rounds += 1;
            if canaries.iter().any(|c| fs::symlink_metadata(c).is_err()) {
                race.losses += 1;
                if stop_at_loss {
                    break;
                }
            }
        }
        race.flips = swapper.stop();
        race
    }

    /// Starts a thread that swaps `root/<name>` (a real folder) with a symlink to `target`
    /// again and again with `renameat2(RENAME_EXCHANGE)`, until [`Swapper::stop`].
    pub fn start_swapper(&self, name: &str, target: impl AsRef<Path>) -> Swapper {
        let link = format!("{name}.swap-link");
        self.symlink(&link, target);
        self.start_exchange(name, &link)
    }
}

/// What [`Fixture::race_tree_delete`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeRace {
    /// Rounds run.
    pub rounds: usize,
    /// Rounds after which a file outside the root was missing.
    pub losses: usize,
    /// Successful swaps.
    pub flips: u64,
}

#[derive(Debug, Default)]
struct SwapState {
    stop: AtomicBool,
    paused: AtomicBool,
    parked: AtomicBool,
    flips: AtomicU64,
}

/// The thread of [`Fixture::start_exchange`]; stops when dropped.
#[derive(Debug)]
pub struct Swapper {
    state: Arc<SwapState>,
    handle: Option<JoinHandle<()>>,
}

impl Swapper {
    /// Stops the thread and returns how many swaps it made.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.state.flips.load(Ordering::Relaxed)
    }

    /// Makes the thread stop swapping, and returns once it is idle.
    pub fn pause(&self) {
        self.state.paused.store(true, Ordering::SeqCst);
        while !self.state.parked.load(Ordering::SeqCst) {
            if self.handle.as_ref().is_none_or(|h| h.is_finished()) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Lets a paused thread swap again.
    pub fn resume(&self) {
        self.state.paused.store(false, Ordering::SeqCst);
    }

    fn halt(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            handle.join().expect("swapper thread panicked");
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}
