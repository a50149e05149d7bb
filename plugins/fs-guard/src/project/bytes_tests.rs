//! Tests of the byte operations the host's file endpoints use (`read_bytes`, `write_bytes`):
//! any content round-trips, the limits hold, a refused overwrite leaves the old file and no
//! temporary name behind, and the hostile paths are refused as for text.

use rojos_plugin_api::{ErrorKind, Limits, ToolError};

use super::*;
use crate::testing::{Fixture, READ_ESCAPES, WRITE_ESCAPES};

fn kind_of<T: std::fmt::Debug>(result: Result<T, PathError>) -> (ErrorKind, String) {
    let error = ToolError::from(result.expect_err("refused"));
    (error.kind, error.message)
}

#[test]
fn read_bytes_returns_binary_content_that_read_text_refuses() {
    let fx = Fixture::new();
    fx.write("logo.png", b"\x89PNG\0\x01\xff");
    let dir = fx.project_dir();
    assert_eq!(dir.read_bytes("logo.png").unwrap(), b"\x89PNG\0\x01\xff");
    assert_eq!(kind_of(dir.read_text("logo.png")).0, ErrorKind::NOT_TEXT);
}

#[test]
fn read_bytes_keeps_the_read_limit() {
    let fx = Fixture::new();
    fx.sized_file("big.bin", 11);
    let dir = fx.project_dir_with(Limits {
        max_read_bytes: 10,
        ..Limits::default()
    });
    let (kind, message) = kind_of(dir.read_bytes("big.bin"));
    assert_eq!(kind, ErrorKind::TOO_LARGE);
    assert_eq!(
        message,
        "'big.bin' is 11 bytes, over the read limit of 10 bytes"
    );
}

#[test]
fn read_bytes_never_reads_outside() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    for (path, kind) in READ_ESCAPES {
        let (got, message) = kind_of(dir.read_bytes(path));
        assert_eq!(&got, kind, "{path:?}: {message}");
        fx.assert_clean(&message);
    }
}

#[test]
fn write_bytes_creates_a_new_file_with_any_content_and_its_folders() {
    write_bytes_creates_a_new_file_with_any_content_and_its_folders_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it where the kernel refuses
/// `RENAME_NOREPLACE` (the new file is then linked onto its name).
pub(super) fn write_bytes_creates_a_new_file_with_any_content_and_its_folders_on(fx: &Fixture) {
    let dir = fx.project_dir();
    let written = dir
        .write_bytes("up/load/a.bin", b"\0\xffbytes", IfExists::Refuse)
        .unwrap();
    assert_eq!(written, Written { replaced: false });
    assert_eq!(fx.read("up/load/a.bin"), b"\0\xffbytes");
    assert_eq!(fx.names("up/load"), vec!["a.bin".to_owned()]);
}

#[test]
fn write_bytes_refusing_an_existing_file_leaves_it_and_no_temporary_name() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let (kind, message) = kind_of(dir.write_bytes("hello.txt", b"new", IfExists::Refuse));
    assert_eq!(kind, ErrorKind::REFUSED);
    assert_eq!(message, "'hello.txt' already exists");
    assert_eq!(fx.read("hello.txt"), b"hello");
    assert!(
        fx.names("").iter().all(|n| !n.ends_with(".tmp")),
        "{:?}",
        fx.names("")
    );
}

#[test]
fn write_bytes_never_replaces_a_file_that_appears_after_the_check() {
    write_bytes_never_replaces_a_file_that_appears_after_the_check_on(&Fixture::new());
}

/// The name is free when checked, taken when the new file is moved onto it: the move
/// (RENAME_NOREPLACE) refuses, the other file stays, the temporary file is gone.
/// `nfs_like_tests` runs it on the NFS-like mount too, where the kernel itself refuses the
/// name it knows exists before the file system could refuse the flag (the fallback's link,
/// for a name that appears later still, is what `move_fallback` relies on for moves).
pub(super) fn write_bytes_never_replaces_a_file_that_appears_after_the_check_on(fx: &Fixture) {
    let dir = fx.project_dir();
    let folder = dir.open_folder(".").unwrap();
    fx.write("late.txt", b"first");
    let (kind, message) = kind_of(super::atomic_write::create_new_file(
        &folder, "late.txt", "late.txt", b"second",
    ));
    assert_eq!(kind, ErrorKind::REFUSED);
    assert_eq!(message, "'late.txt' already exists");
    assert_eq!(fx.read("late.txt"), b"first");
    assert!(fx.names("").iter().all(|n| !n.ends_with(".tmp")));
}

#[test]
fn write_bytes_replacing_says_it_replaced_and_keeps_the_mode() {
    let fx = Fixture::new();
    fx.chmod("hello.txt", 0o640);
    let dir = fx.project_dir();
    let written = dir
        .write_bytes("hello.txt", b"new", IfExists::Replace)
        .unwrap();
    assert_eq!(written, Written { replaced: true });
    assert_eq!(fx.read("hello.txt"), b"new");
    assert_eq!(fx.mode("hello.txt") & 0o777, 0o640);
}

#[test]
fn write_bytes_keeps_the_write_limit() {
    let fx = Fixture::new();
    let dir = fx.project_dir_with(Limits {
        max_write_bytes: 3,
        ..Limits::default()
    });
    let (kind, _) = kind_of(dir.write_bytes("x.bin", b"four", IfExists::Refuse));
    assert_eq!(kind, ErrorKind::TOO_LARGE);
    assert!(!fx.exists("x.bin"));
}

#[test]
fn write_bytes_never_creates_or_changes_anything_outside() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for if_exists in [IfExists::Refuse, IfExists::Replace] {
        for (path, kind) in WRITE_ESCAPES {
            let (got, message) = kind_of(dir.write_bytes(path, b"pwned", if_exists));
            assert_eq!(&got, kind, "{path:?}: {message}");
            fx.assert_clean(&message);
        }
    }
    fx.assert_outside_unchanged(&before);
}
