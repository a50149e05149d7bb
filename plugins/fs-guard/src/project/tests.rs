//! Tests of `ProjectDir` against the hostile path classes: escapes, special files,
//! resources, encoding, the hard-link limit, atomic writes and the happy paths. Each test
//! builds its own fixture, where every file outside the root holds the leak marker.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use rojos_plugin_api::{ErrorKind, Limits, ToolError};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::*;
use crate::testing::{
    Fixture, CREATE_DIR_ESCAPES, LEAK_MARKER, LIST_ESCAPES, RACE_INSIDE, READ_ESCAPES,
    WRITE_ESCAPES,
};

const OUTSIDE: ErrorKind = ErrorKind::OUTSIDE_ROOT;
const REFUSED: ErrorKind = ErrorKind::REFUSED;
const NOT_FOUND: ErrorKind = ErrorKind::NOT_FOUND;
const INVALID: ErrorKind = ErrorKind::INVALID_ARGUMENTS;

/// Asserts that `result` failed with `kind` and a clean message, and returns the message.
fn refused<T: std::fmt::Debug>(
    fx: &Fixture,
    path: &str,
    result: Result<T, PathError>,
    kind: ErrorKind,
) -> String {
    let error = ToolError::from(result.expect_err(path));
    assert_eq!(error.kind, kind, "{path:?}: {}", error.message);
    fx.assert_clean(&error.message);
    for target in ["../../..", "/proc", "nonexistent-rojos", "/etc"] {
        assert!(
            path.contains(target) || !error.message.contains(target),
            "{path:?}: message names a target: {}",
            error.message
        );
    }
    error.message
}

fn limits(read: u64, write: u64, list: u64) -> Limits {
    Limits {
        max_read_bytes: read,
        max_write_bytes: write,
        max_list_entries: list,
    }
}

// ---------------------------------------------------------------- escape

#[test]
fn read_text_never_reaches_outside_the_root() {
    read_text_never_reaches_outside_the_root_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn read_text_never_reaches_outside_the_root_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for (path, kind) in READ_ESCAPES {
        refused(fx, path, dir.read_text(path), kind.clone());
    }
    fx.assert_outside_unchanged(&before);
}

#[test]
fn meta_never_reaches_outside_the_root() {
    meta_never_reaches_outside_the_root_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn meta_never_reaches_outside_the_root_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    for (path, kind) in READ_ESCAPES {
        refused(fx, path, dir.meta(path), kind.clone());
    }
}

#[test]
fn list_never_reaches_outside_the_root() {
    list_never_reaches_outside_the_root_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn list_never_reaches_outside_the_root_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let cases = LIST_ESCAPES;
    for (path, kind) in cases.iter() {
        refused(fx, path, dir.list(path), kind.clone());
    }
}

#[test]
fn list_reports_in_root_links_with_their_target_type_and_omits_the_rest() {
    let fx = Fixture::new();
    fx.plant_links();
    fx.fifo("pipe");
    let listing = fx.project_dir().list(".").unwrap();
    let got: Vec<(&str, EntryType)> = listing
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("in-dir", EntryType::Directory),
            ("sub", EntryType::Directory),
            ("hello.txt", EntryType::File),
            ("in-chain", EntryType::File),
            ("in-file", EntryType::File),
        ]
    );
    let sub = fx.project_dir().list("in-dir").unwrap();
    let names: Vec<&str> = sub.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["deeper", "up-dir", "inner.txt", "up"]);
    // `up-dir` links to a folder, `up` to a file: each listed with its target's type.
    assert_eq!(sub.entries[1].kind, EntryType::Directory);
    assert_eq!(sub.entries[3].kind, EntryType::File);
    fx.assert_clean(&listing.to_json().to_string());
}

#[test]
fn a_write_through_a_dangling_link_on_the_way_says_the_way_is_not_a_folder() {
    let fx = Fixture::new();
    fx.plant_links();
    let message = refused(
        &fx,
        "dangling-in/new.txt",
        fx.project_dir().write_text("dangling-in/new.txt", "x"),
        REFUSED,
    );
    assert_eq!(
        message,
        "'dangling-in/new.txt' is not a folder, or one of the folders on the way is a file"
    );
}

#[test]
fn write_text_never_creates_or_changes_anything_outside() {
    write_text_never_creates_or_changes_anything_outside_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn write_text_never_creates_or_changes_anything_outside_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    let cases = WRITE_ESCAPES;
    for (path, kind) in cases.iter() {
        let message = refused(fx, path, dir.write_text(path, "pwned"), kind.clone());
        if *path == "dangling-out" {
            assert_eq!(message, "'dangling-out' is a symbolic link that does not lead to anything in the project: it is left as it is");
        }
    }
    fx.assert_outside_unchanged(&before);
    assert!(!crate::testing::host_path_exists("/tmp/rojos-escape.txt"));
}

#[test]
fn write_through_an_in_root_symlink_is_refused_naming_its_target() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let message = refused(&fx, "in-chain", dir.write_text("in-chain", "x"), REFUSED);
    assert_eq!(
        message,
        "'in-chain' is a symbolic link to 'sub/inner.txt': write to 'sub/inner.txt' instead"
    );
    assert_eq!(fx.read("sub/inner.txt"), b"inner");
    dir.write_text("in-dir/new.txt", "via a linked folder")
        .unwrap();
    assert_eq!(fx.read("sub/new.txt"), b"via a linked folder");
}

#[test]
fn create_dir_never_creates_anything_outside() {
    create_dir_never_creates_anything_outside_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn create_dir_never_creates_anything_outside_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    let cases = CREATE_DIR_ESCAPES;
    for (path, kind) in cases.iter() {
        refused(fx, path, dir.create_dir(path), kind.clone());
    }
    fx.assert_outside_unchanged(&before);
    assert!(!crate::testing::host_path_exists("/tmp/rojos-escape-dir"));
}

#[test]
fn delete_and_rename_never_touch_anything_outside() {
    delete_and_rename_never_touch_anything_outside_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn delete_and_rename_never_touch_anything_outside_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for path in [
        "../x",
        "rel-dir/secret.txt",
        "abs-dir/x",
        "evil/x",
        "../../p2/root/x",
    ] {
        refused(fx, path, dir.delete(path), OUTSIDE);
        refused(fx, path, dir.rename(path, "stolen"), OUTSIDE);
        refused(fx, path, dir.rename("hello.txt", path), OUTSIDE);
    }
    // A link is deleted or moved as a link; its outside target stays.
    dir.rename("rel-file", "moved-link").unwrap();
    dir.delete("moved-link").unwrap();
    dir.delete("abs-dir").unwrap();
    fx.assert_outside_unchanged(&before);
    assert!(!fx.exists("moved-link") && !fx.exists("abs-dir"));
}

#[test]
fn reads_racing_a_folder_swapped_for_an_outside_link_never_leak() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let swapper = fx.start_race();
    let (mut inside, mut refused, mut naive_leaks) = (0, 0, 0);
    for _ in 0..6_000 {
        match dir.read_text("swap/secret.txt") {
            Ok(text) => {
                assert_eq!(text, RACE_INSIDE, "read returned other content");
                inside += 1;
            }
            Err(error) => {
                fx.assert_clean(&error.to_string());
                refused += 1;
            }
        }
        if let Ok(listing) = dir.list("swap") {
            fx.assert_clean(&listing.to_json().to_string());
        }
        if let Ok(meta) = dir.meta("swap/secret.txt") {
            assert_eq!(meta.size, RACE_INSIDE.len() as u64, "meta saw another file");
        }
        if fx
            .naive_read("swap/secret.txt")
            .is_some_and(|text| text.contains(LEAK_MARKER))
        {
            naive_leaks += 1;
        }
    }
    let flips = swapper.stop();
    assert!(flips > 100, "the swapper barely ran ({flips} flips)");
    assert!(
        inside > 50,
        "too few reads saw the inside file: {inside} of 6000"
    );
    assert!(
        refused > 0,
        "no read ever saw the link: the race did not happen"
    );
    assert!(
        naive_leaks > 0,
        "control: unconfined std::fs reads never leaked, so the race has no teeth"
    );
}

// ---------------------------------------------------------------- special files

fn within_deadline<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{name} blocked for 5 s"))
}

#[test]
fn reading_a_fifo_returns_an_error_at_once_even_eight_at_a_time() {
    let fx = Fixture::new();
    fx.fifo("pipe");
    let start = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let dir = fx.project_dir();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(dir.read_text("pipe").map_err(ToolError::from));
            });
            rx
        })
        .collect();
    for rx in handles {
        let error = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a FIFO read blocked")
            .expect_err("a FIFO read succeeded");
        assert_eq!(error.kind, REFUSED);
        assert_eq!(
            error.message,
            "'pipe' is a FIFO (named pipe), not a regular file or folder"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn fifo_is_refused_by_meta_write_and_create_dir_and_left_out_of_lists() {
    let fx = Fixture::new();
    fx.fifo("pipe");
    let dir = fx.project_dir();
    let meta = refused(&fx, "pipe", dir.meta("pipe"), REFUSED);
    assert!(meta.contains("FIFO"), "{meta}");
    let write = within_deadline("write to a FIFO", {
        let dir = fx.project_dir();
        move || dir.write_text("pipe", "x").map_err(ToolError::from)
    });
    assert_eq!(write.unwrap_err().kind, REFUSED);
    refused(&fx, "pipe", dir.create_dir("pipe"), REFUSED);
    assert!(!dir
        .list(".")
        .unwrap()
        .entries
        .iter()
        .any(|e| e.name == "pipe"));
    assert_eq!(fx.names("."), ["hello.txt", "pipe", "sub"]);
}

#[test]
fn a_file_swapped_with_a_fifo_during_reads_never_blocks() {
    let fx = Fixture::new();
    fx.write("racy", b"regular");
    fx.fifo("racy-pipe");
    let dir = fx.project_dir();
    let done = within_deadline("reads racing a FIFO", move || {
        let fx_swap = fx;
        let swapper = fx_swap.start_exchange("racy", "racy-pipe");
        let mut ok = 0;
        // At least 3,000 reads, and more (up to ten times as many) until one found the
        // regular file: on a loaded machine the swapper may sleep through the first ones
        // with the FIFO in place.
        for read in 0..30_000 {
            if read >= 3_000 && ok > 0 {
                break;
            }
            match dir.read_text("racy") {
                Ok(text) => {
                    assert_eq!(text, "regular");
                    ok += 1;
                }
                Err(error) => assert!(
                    matches!(
                        error,
                        PathError::Special { .. } | PathError::NotFound { .. }
                    ),
                    "{error}"
                ),
            }
        }
        swapper.stop();
        ok
    });
    assert!(done > 0, "no read saw the regular file");
}

#[test]
fn a_device_node_is_refused_without_being_read() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    if fx.char_device("null") {
        let message = refused(&fx, "null", dir.read_text("null"), REFUSED);
        assert_eq!(
            message,
            "'null' is a character device, not a regular file or folder"
        );
        refused(&fx, "null", dir.meta("null"), REFUSED);
        refused(&fx, "null", dir.write_text("null", "x"), REFUSED);
        assert!(!dir
            .list(".")
            .unwrap()
            .entries
            .iter()
            .any(|e| e.name == "null"));
    }
    fx.symlink("devnull", "/dev/null");
    refused(&fx, "devnull", dir.read_text("devnull"), OUTSIDE);
    refused(&fx, "devnull", dir.meta("devnull"), OUTSIDE);
}

#[test]
fn a_symlink_loop_is_refused_as_too_many_links() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let message = refused(&fx, "loop-a", dir.read_text("loop-a"), REFUSED);
    assert_eq!(message, "'loop-a': too many levels of symbolic links");
    refused(&fx, "self-loop/x", dir.read_text("self-loop/x"), REFUSED);
}

// ---------------------------------------------------------------- resource

#[test]
fn a_fifty_mib_file_is_refused_with_size_and_limit() {
    let fx = Fixture::new();
    fx.sized_file("big.bin", 50 << 20);
    let dir = fx.project_dir();
    let message = refused(
        &fx,
        "big.bin",
        dir.read_text("big.bin"),
        ErrorKind::TOO_LARGE,
    );
    assert_eq!(
        message,
        "'big.bin' is 52428800 bytes, over the read limit of 1048576 bytes"
    );
    assert_eq!(dir.meta("big.bin").unwrap().size, 50 << 20);
}

#[test]
fn a_file_of_exactly_the_read_cap_is_read_and_one_byte_more_is_refused() {
    let fx = Fixture::new();
    let cap = 1 << 20;
    fx.write("cap.txt", &vec![b'a'; cap]);
    fx.write("over.txt", &vec![b'a'; cap + 1]);
    let dir = fx.project_dir();
    assert_eq!(dir.read_text("cap.txt").unwrap().len(), cap);
    let message = refused(
        &fx,
        "over.txt",
        dir.read_text("over.txt"),
        ErrorKind::TOO_LARGE,
    );
    assert_eq!(
        message,
        "'over.txt' is 1048577 bytes, over the read limit of 1048576 bytes"
    );
    let small = fx.project_dir_with(limits(5, 5, 10));
    assert_eq!(small.read_text("hello.txt").unwrap(), "hello");
    fx.write("six.txt", b"sixsix");
    let message = refused(
        &fx,
        "six.txt",
        small.read_text("six.txt"),
        ErrorKind::TOO_LARGE,
    );
    assert_eq!(
        message,
        "'six.txt' is 6 bytes, over the read limit of 5 bytes"
    );
}

#[test]
fn a_five_mib_write_is_refused_and_nothing_is_written() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let text = "a".repeat(5 << 20);
    let message = refused(
        &fx,
        "big.txt",
        dir.write_text("big.txt", &text),
        ErrorKind::TOO_LARGE,
    );
    assert_eq!(
        message,
        "text is 5242880 bytes, over the write limit of 1048576 bytes"
    );
    assert!(!fx.exists("big.txt"));
    let exact = "b".repeat(1 << 20);
    dir.write_text("exact.txt", &exact).unwrap();
    assert_eq!(fx.read("exact.txt").len(), 1 << 20);
}

#[test]
fn over_long_paths_and_names_are_refused_before_any_file_system_call() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let long_path = "d/".repeat(2100) + "x";
    let message = refused(&fx, "long", dir.read_text(&long_path), INVALID);
    assert_eq!(
        message,
        "path is 4201 bytes long, over the limit of 4096 bytes"
    );
    refused(&fx, "long", dir.write_text(&long_path, "x"), INVALID);
    refused(&fx, "long", dir.create_dir(&long_path), INVALID);
    let long_name = "n".repeat(256);
    let message = refused(&fx, "name", dir.write_text(&long_name, "x"), INVALID);
    assert!(message.ends_with(": name too long (at most 255 bytes per name, 4096 per path)"));
    assert!(message.contains("' (256 bytes)"), "{message}");
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
    dir.write_text(&"n".repeat(255), "max").unwrap();
}

#[test]
fn a_hundred_nested_folders_can_be_written_listed_and_read_back() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let nested = vec!["level"; 100].join("/");
    let file = format!("{nested}/deep.txt");
    dir.write_text(&file, "deep").unwrap();
    assert_eq!(dir.read_text(&file).unwrap(), "deep");
    dir.create_dir(&format!("{nested}/more")).unwrap();
    let names: Vec<String> = dir
        .list(&nested)
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["more", "deep.txt"]);
    assert_eq!(dir.meta(&nested).unwrap().kind, EntryType::Directory);
}

#[test]
fn a_listing_over_the_entry_limit_is_cut_and_says_so() {
    let fx = Fixture::new();
    for name in ["e", "d", "c", "b", "a"] {
        fx.write(&format!("many/{name}"), b"");
    }
    let listing = fx.project_dir_with(limits(10, 10, 3)).list("many").unwrap();
    assert!(listing.truncated());
    assert_eq!(
        listing.to_json().to_string(),
        r#"{"entries":[{"name":"a","type":"file"},{"name":"b","type":"file"},{"name":"c","type":"file"}],"omitted":2,"total":5,"truncated":true}"#
    );
    let full = fx.project_dir_with(limits(10, 10, 5)).list("many").unwrap();
    assert!(!full.truncated());
    assert!(full.to_json().is_array());
}

// ---------------------------------------------------------------- encoding

#[test]
fn binary_and_utf16_content_is_refused_naming_the_nul_offset() {
    let fx = Fixture::new();
    fx.write("bin", b"ab\0cd");
    fx.write("utf16", &[0xff, 0xfe, b'h', 0, b'i', 0]);
    let dir = fx.project_dir();
    let message = refused(&fx, "bin", dir.read_text("bin"), ErrorKind::NOT_TEXT);
    assert_eq!(
        message,
        "'bin' contains a NUL byte at offset 2: it is binary (or UTF-16), not UTF-8 text"
    );
    refused(&fx, "utf16", dir.read_text("utf16"), ErrorKind::NOT_TEXT);
}

#[test]
fn invalid_utf8_is_refused_naming_the_byte_offset() {
    let fx = Fixture::new();
    fx.write("latin1.txt", b"caf\xe9 au lait");
    let message = refused(
        &fx,
        "latin1.txt",
        fx.project_dir().read_text("latin1.txt"),
        ErrorKind::NOT_TEXT,
    );
    assert_eq!(
        message,
        "'latin1.txt' is not UTF-8 text (invalid byte at offset 3)"
    );
}

#[test]
fn text_is_returned_verbatim() {
    let fx = Fixture::new();
    let text = "\u{feff}line one\r\n\ttabbed — ünïcödé 🦀\nno final newline";
    fx.write("verbatim.txt", text.as_bytes());
    assert_eq!(fx.project_dir().read_text("verbatim.txt").unwrap(), text);
}

#[test]
fn backslashes_and_drive_prefixes_are_refused() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let message = refused(&fx, "a\\b", dir.write_text("a\\b", "x"), INVALID);
    assert_eq!(
        message,
        r"'a\b' contains a backslash: separate folders with '/' (a backslash is never a separator here)"
    );
    refused(&fx, "C:\\x", dir.write_text("C:\\x", "x"), OUTSIDE);
    refused(&fx, "c:x", dir.read_text("c:x"), OUTSIDE);
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
}

#[test]
fn tilde_percent_escapes_and_lookalikes_are_literal_names_inside_the_root() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for path in [
        "~/x",
        "%2e%2e/x",
        "\u{2025}/x",
        "\u{ff0e}\u{ff0e}/x",
        "..\u{2215}x",
    ] {
        dir.write_text(path, "literal").unwrap();
        assert_eq!(dir.read_text(path).unwrap(), "literal");
        assert_eq!(fx.read(path), b"literal");
    }
    dir.create_dir("%2e%2e%2f%2e%2e").unwrap();
    assert!(fx.exists("%2e%2e%2f%2e%2e"));
    fx.assert_outside_unchanged(&before);
}

#[test]
fn control_and_bidi_characters_are_refused_in_new_names_but_existing_ones_stay_readable() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    for name in [
        "bell\u{7}.txt",
        "new\nline",
        "evil\u{202e}txt.exe",
        "iso\u{2066}late",
        "c1\u{85}",
    ] {
        let message = refused(&fx, name, dir.write_text(name, "x"), INVALID);
        assert!(
            message.contains("new names may not contain control"),
            "{message}"
        );
        assert!(
            !message.contains('\u{202e}') && !message.contains('\n'),
            "{message:?}"
        );
        refused(&fx, name, dir.create_dir(name), INVALID);
        fx.write(name, b"planted");
        assert_eq!(dir.read_text(name).unwrap(), "planted");
        assert_eq!(dir.meta(name).unwrap().kind, EntryType::File);
    }
    let message = refused(&fx, "x", dir.read_text("gone\u{202e}"), NOT_FOUND);
    assert_eq!(message, r"'gone\u{202e}' does not exist");
    assert_eq!(dir.list(".").unwrap().entries.len(), 7);
}

#[test]
fn names_that_are_not_utf8_are_left_out_of_listings() {
    let fx = Fixture::new();
    fx.write_raw_name(b"bad\xff.txt", b"x");
    let names: Vec<String> = fx
        .project_dir()
        .list(".")
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["sub", "hello.txt"]);
}

#[test]
fn an_empty_path_asks_for_dot() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let message = refused(&fx, "", dir.list(""), INVALID);
    assert_eq!(message, "path is empty: use '.' for the project root");
    refused(&fx, "", dir.write_text("", "x"), INVALID);
}

// ---------------------------------------------------------------- not preventable

/// Not preventable: a hard link planted in the root is an ordinary file to any path check, so
/// reading it returns the outside content. Writing replaces the name only.
#[test]
fn a_planted_hard_link_reads_the_outside_file_but_a_write_replaces_only_the_name() {
    a_planted_hard_link_reads_the_outside_file_but_a_write_replaces_only_the_name_on(
        &Fixture::new(),
    );
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn a_planted_hard_link_reads_the_outside_file_but_a_write_replaces_only_the_name_on(
    fx: &Fixture,
) {
    fx.hard_link_outside("linked.txt", "secret.txt");
    let dir = fx.project_dir();
    let text = dir.read_text("linked.txt").unwrap();
    assert!(
        text.contains(LEAK_MARKER),
        "documented limit: hard links are followed"
    );
    let before = fx.snapshot_outside();
    dir.write_text("linked.txt", "replaced").unwrap();
    assert_eq!(fx.read("linked.txt"), b"replaced");
    fx.assert_outside_unchanged(&before);
}

// ---------------------------------------------------------------- atomic writes

#[test]
fn a_write_leaves_no_temporary_file_and_keeps_the_old_mode() {
    a_write_leaves_no_temporary_file_and_keeps_the_old_mode_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn a_write_leaves_no_temporary_file_and_keeps_the_old_mode_on(fx: &Fixture) {
    fx.chmod("hello.txt", 0o640);
    let dir = fx.project_dir();
    dir.write_text("hello.txt", "hello again").unwrap();
    dir.write_text("sub/new.txt", "new").unwrap();
    assert_eq!(fx.read("hello.txt"), b"hello again");
    assert_eq!(fx.mode("hello.txt"), 0o640);
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
    assert_eq!(fx.names("sub"), ["deeper", "inner.txt", "new.txt"]);
}

#[test]
fn a_write_over_a_setuid_or_setgid_file_keeps_its_mode_without_those_bits() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    for (mode, kept) in [
        (0o4755, 0o755),
        (0o2755, 0o755),
        (0o7750, 0o750),
        (0o1644, 0o644),
    ] {
        fx.chmod("hello.txt", mode);
        assert_eq!(
            fx.mode("hello.txt"),
            mode,
            "the fixture could not set {mode:o}"
        );
        dir.write_text("hello.txt", "#!/bin/sh\n").unwrap();
        assert_eq!(
            fx.mode("hello.txt"),
            kept,
            "after overwriting a {mode:o} file"
        );
        assert_eq!(fx.read("hello.txt"), b"#!/bin/sh\n");
    }
}

#[test]
fn new_files_and_folders_get_no_setuid_setgid_or_sticky_bit() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    dir.write_text("fresh/new.txt", "x").unwrap();
    dir.create_dir("made/deeper").unwrap();
    for made in ["fresh", "fresh/new.txt", "made", "made/deeper"] {
        assert_eq!(fx.mode(made) & 0o7000, 0, "{made}: {:o}", fx.mode(made));
    }
}

#[test]
fn a_write_creates_missing_parent_folders() {
    let fx = Fixture::new();
    fx.project_dir().write_text("a/b/c.txt", "abc").unwrap();
    assert_eq!(fx.read("a/b/c.txt"), b"abc");
}

#[test]
fn writing_over_a_folder_symlink_or_fifo_is_refused_and_changes_nothing() {
    let fx = Fixture::new();
    fx.plant_links();
    fx.fifo("pipe");
    let dir = fx.project_dir();
    let cases: &[(&str, &str)] = &[
        ("sub", "'sub' is a folder, not a file"),
        ("sub/", "'sub/' names a folder: give the name of a file"),
        (".", "'.' names a folder: give the name of a file"),
        ("new/", "'new/' names a folder: give the name of a file"),
        ("sub/..", "'sub/..' names a folder: give the name of a file"),
        (
            "hello.txt/x",
            "'hello.txt/x' is not a folder, or one of the folders on the way is a file",
        ),
        (
            "in-file",
            "'in-file' is a symbolic link to 'hello.txt': write to 'hello.txt' instead",
        ),
        (
            "in-dir",
            "'in-dir' is a symbolic link to 'sub': write to 'sub' instead",
        ),
        (
            "pipe",
            "'pipe' is a FIFO (named pipe), not a regular file or folder",
        ),
    ];
    for (path, expected) in cases {
        let message = refused(&fx, path, dir.write_text(path, "x"), REFUSED);
        assert_eq!(&message, expected);
    }
    assert_eq!(fx.read("hello.txt"), b"hello");
    assert!(!fx.exists("new"));
}

// ---------------------------------------------------------------- happy paths

#[test]
fn meta_reports_type_size_and_rfc3339_time_in_whole_seconds() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let meta = dir.meta("hello.txt").unwrap();
    assert_eq!((meta.kind, meta.size), (EntryType::File, 5));
    let parsed = OffsetDateTime::parse(&meta.modified_at, &Rfc3339).unwrap();
    assert!(
        meta.modified_at.ends_with('Z') && meta.modified_at.len() == 20,
        "{}",
        meta.modified_at
    );
    assert!((OffsetDateTime::now_utc() - parsed).whole_seconds().abs() < 60);
    let json = serde_json::to_value(&meta).unwrap();
    assert_eq!(json["type"], "file");
    assert_eq!(json["size"], 5);
    assert_eq!(json["modifiedAt"], meta.modified_at.as_str());
    assert_eq!(dir.meta(".").unwrap().kind, EntryType::Directory);
    assert_eq!(
        dir.meta("in-dir-missing").unwrap_err().to_string(),
        "'in-dir-missing' does not exist"
    );
}

#[test]
fn list_puts_folders_first_then_files_each_by_name_with_types() {
    let fx = Fixture::new();
    fx.write("B.txt", b"");
    fx.write("a.txt", b"");
    fx.mkdir("c");
    let json = fx.project_dir().list(".").unwrap().to_json().to_string();
    assert_eq!(
        json,
        r#"[{"name":"c","type":"directory"},{"name":"sub","type":"directory"},{"name":"B.txt","type":"file"},{"name":"a.txt","type":"file"},{"name":"hello.txt","type":"file"}]"#
    );
}

#[test]
fn a_cut_listing_keeps_every_folder_before_the_files_with_the_smallest_names() {
    let fx = Fixture::new();
    for name in ["a1", "a2", "a3", "a4"] {
        fx.write(&format!("mixed/{name}"), b"");
    }
    fx.mkdir("mixed/y-folder");
    fx.mkdir("mixed/z-folder");
    let listing = fx
        .project_dir_with(limits(10, 10, 3))
        .list("mixed")
        .unwrap();
    assert_eq!(
        listing.to_json().to_string(),
        r#"{"entries":[{"name":"y-folder","type":"directory"},{"name":"z-folder","type":"directory"},{"name":"a1","type":"file"}],"omitted":3,"total":6,"truncated":true}"#
    );
    assert_eq!(listing.omitted(), 3);
}

#[test]
fn in_root_relative_paths_and_links_resolve() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    for (path, text) in [
        ("in-file", "hello"),
        ("in-chain", "inner"),
        ("sub/up", "hello"),
        ("in-dir/inner.txt", "inner"),
        ("sub/up-dir/hello.txt", "hello"),
        ("sub/../hello.txt", "hello"),
        ("./sub//inner.txt", "inner"),
    ] {
        assert_eq!(dir.read_text(path).unwrap(), text, "{path}");
    }
}

#[test]
fn create_dir_accepts_existing_folders_and_refuses_existing_files() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    for path in [".", "sub", "sub/", "in-dir", "new/a/b", "new/a/b"] {
        dir.create_dir(path).unwrap();
    }
    assert!(fx.is_dir("new/a/b"));
    let message = refused(&fx, "hello.txt", dir.create_dir("hello.txt"), REFUSED);
    assert_eq!(message, "'hello.txt' already exists and is not a folder");
    let message = refused(&fx, "dangling-in", dir.create_dir("dangling-in"), REFUSED);
    assert_eq!(
        message,
        "'dangling-in' is a symbolic link that does not lead to anything in the project: it is left as it is"
    );
}

#[test]
fn from_context_duplicates_the_host_descriptor_and_leaves_it_open() {
    let fx = Fixture::new();
    let ctx = fx.context();
    let dir = ProjectDir::from_context(ctx.ctx()).unwrap();
    drop(dir);
    let again = ProjectDir::from_context(ctx.ctx()).unwrap();
    assert_eq!(again.read_text("hello.txt").unwrap(), "hello");
    let bad = CallContext {
        root_fd: -1,
        ..ctx.ctx().clone()
    };
    assert_eq!(
        ProjectDir::from_context(&bad).unwrap_err().kind,
        ErrorKind::INTERNAL
    );
}

#[test]
fn from_context_refuses_a_descriptor_that_is_not_a_folder() {
    use std::os::fd::AsRawFd;
    let fx = Fixture::new();
    let file = fx.open_fd("hello.txt");
    let ctx = CallContext {
        project_id: "p1".into(),
        root_fd: file.as_raw_fd(),
        limits: Limits::default(),
        create_only: Vec::new(),
    };
    let error = ProjectDir::from_context(&ctx).unwrap_err();
    assert_eq!(error.kind, ErrorKind::INTERNAL);
    assert!(
        error.message.ends_with("is not a folder"),
        "{}",
        error.message
    );
}
