//! Tests of the operations that change names: `delete`, `delete_recursive` and `rename`,
//! against the hostile path classes that apply to them: symlinks leading out (as the
//! source, as the destination's folder, as a component), `..`, absolute paths, the root
//! itself (also as `a/..`), overwrites, a folder moved into itself, special files, and a
//! folder swapped for a symlink while a recursive delete runs (with a leak canary and a
//! naive control that shows the race is real).

use std::sync::mpsc;
use std::time::Duration;

use rojos_plugin_api::{ErrorKind, ToolError};

use super::*;
use crate::testing::{Fixture, DELETE_ESCAPES, MOVE_DEST_ESCAPES};

const OUTSIDE: ErrorKind = ErrorKind::OUTSIDE_ROOT;
const REFUSED: ErrorKind = ErrorKind::REFUSED;
const NOT_FOUND: ErrorKind = ErrorKind::NOT_FOUND;

/// Asserts that `result` failed with `kind` and a message that names no outside target and
/// leaks nothing; returns the message.
pub(super) fn refused(
    fx: &Fixture,
    what: &str,
    result: Result<(), PathError>,
    kind: &ErrorKind,
) -> String {
    let error = ToolError::from(result.expect_err(what));
    assert_eq!(&error.kind, kind, "{what:?}: {}", error.message);
    fx.assert_clean(&error.message);
    for target in ["../../..", "/proc", "nonexistent-rojos", "/etc", "/outside"] {
        assert!(
            what.contains(target) || !error.message.contains(target),
            "{what:?}: the message names a link target: {}",
            error.message
        );
    }
    error.message
}

/// The root's own files, as [`Fixture::new`] and [`Fixture::plant_links`] leave them.
fn assert_root_intact(fx: &Fixture) {
    assert_eq!(fx.read("hello.txt"), b"hello");
    assert_eq!(fx.read("sub/inner.txt"), b"inner");
    assert!(fx.is_dir("sub/deeper"));
}

fn within_deadline<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{name} blocked for 5 s"))
}

// ---------------------------------------------------------------- escape

#[test]
fn delete_never_touches_anything_outside_or_the_root() {
    delete_never_touches_anything_outside_or_the_root_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn delete_never_touches_anything_outside_or_the_root_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for (path, kind) in DELETE_ESCAPES {
        refused(fx, path, dir.delete(path), kind);
        refused(fx, path, dir.delete_recursive(path), kind);
    }
    fx.assert_outside_unchanged(&before);
    assert_root_intact(fx);
}

#[test]
fn rename_never_moves_anything_from_outside_or_the_root() {
    rename_never_moves_anything_from_outside_or_the_root_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn rename_never_moves_anything_from_outside_or_the_root_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for (path, kind) in DELETE_ESCAPES {
        refused(fx, path, dir.rename(path, "stolen"), kind);
    }
    fx.assert_outside_unchanged(&before);
    assert!(!fx.exists("stolen"));
    assert_root_intact(fx);
}

#[test]
fn rename_never_moves_anything_out_or_over_an_existing_name() {
    rename_never_moves_anything_out_or_over_an_existing_name_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn rename_never_moves_anything_out_or_over_an_existing_name_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for from in ["hello.txt", "sub"] {
        for (to, kind) in MOVE_DEST_ESCAPES {
            refused(fx, &format!("{from} -> {to}"), dir.rename(from, to), kind);
        }
    }
    fx.assert_outside_unchanged(&before);
    assert!(!crate::testing::host_path_exists("/tmp/rojos-escape-moved"));
    assert_root_intact(fx);
}

#[test]
fn the_root_itself_cannot_be_deleted_or_moved_even_as_a_path_that_resolves_to_it() {
    the_root_itself_cannot_be_deleted_or_moved_even_as_a_path_that_resolves_to_it_on(
        &Fixture::new(),
    );
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn the_root_itself_cannot_be_deleted_or_moved_even_as_a_path_that_resolves_to_it_on(
    fx: &Fixture,
) {
    fx.plant_links();
    let dir = fx.project_dir();
    let names = fx.names(".");
    for path in [
        ".",
        "./",
        "sub/..",
        "sub/deeper/../..",
        "in-dir/..",
        "sub/up-dir/.",
    ] {
        let message = refused(fx, path, dir.delete_recursive(path), &REFUSED);
        assert_eq!(
            message, "the project root itself cannot be deleted",
            "{path}"
        );
        refused(fx, path, dir.delete(path), &REFUSED);
        let message = refused(fx, path, dir.rename(path, "moved"), &REFUSED);
        assert_eq!(message, "the project root itself cannot be moved", "{path}");
    }
    // A dotted path that resolves to another folder names no entry.
    let message = refused(
        fx,
        "sub/deeper/..",
        dir.delete_recursive("sub/deeper/.."),
        &REFUSED,
    );
    assert_eq!(
        message,
        "'sub/deeper/..' does not end in a name: give the path of the file or folder itself, \
         without '.' or '..' at the end"
    );
    // `a/..` when `a` does not exist is resolved by the kernel: not found.
    refused(fx, "a/..", dir.delete_recursive("a/.."), &NOT_FOUND);
    assert_root_intact(fx);
    assert_eq!(fx.names("."), names, "something was deleted");
}

#[test]
fn a_symlink_leading_out_as_a_parent_component_is_refused_naming_only_the_path() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    let message = refused(&fx, "rel-dir/x", dir.delete("rel-dir/x"), &OUTSIDE);
    assert_eq!(
        message,
        "'rel-dir/x' leads outside the project: paths are relative to the project root"
    );
    let message = refused(&fx, "x", dir.rename("hello.txt", "abs-dir/x"), &OUTSIDE);
    assert_eq!(
        message,
        "'abs-dir/x' leads outside the project: paths are relative to the project root"
    );
    let message = refused(&fx, "x", dir.rename("chain-a/secret.txt", "got"), &OUTSIDE);
    assert_eq!(
        message,
        "'chain-a/secret.txt' leads outside the project: paths are relative to the project root"
    );
    fx.assert_outside_unchanged(&before);
}

// ---------------------------------------------------------------- symlinks as the entry

#[test]
fn deleting_a_symlink_removes_the_link_only_never_its_target() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    for link in ["abs-file", "rel-file", "dangling-out", "loop-a", "in-file"] {
        dir.delete(link).unwrap();
        assert!(!fx.exists(link), "{link}");
    }
    for link in [
        "abs-dir",
        "rel-dir",
        "chain-a",
        "proc-root",
        "evil",
        "in-dir",
        "sub/up-dir",
    ] {
        dir.delete_recursive(link).unwrap();
        assert!(!fx.exists(link), "{link}");
    }
    fx.assert_outside_unchanged(&before);
    assert_root_intact(&fx);
    assert_eq!(fx.names("sub"), ["deeper", "inner.txt", "up"]);
}

#[test]
fn a_trailing_slash_on_a_symlink_is_refused_and_the_link_and_target_stay() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    for path in ["in-dir/", "rel-dir/", "sub/up-dir/"] {
        let message = refused(&fx, path, dir.delete_recursive(path), &REFUSED);
        assert_eq!(
            message,
            format!("'{path}' is a symbolic link, not a regular file or folder")
        );
        refused(&fx, path, dir.rename(path, "moved"), &REFUSED);
    }
    assert!(fx.exists("in-dir") && fx.exists("rel-dir"));
    assert_root_intact(&fx);
}

#[test]
fn a_symlink_is_moved_as_a_link_and_still_refused_where_it_leads_out() {
    a_symlink_is_moved_as_a_link_and_still_refused_where_it_leads_out_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn a_symlink_is_moved_as_a_link_and_still_refused_where_it_leads_out_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let before = fx.snapshot_outside();
    dir.rename("rel-dir", "sub/moved-link").unwrap();
    dir.rename("abs-file", "moved-abs").unwrap();
    dir.rename("in-dir", "sub/deeper/in-dir").unwrap();
    fx.assert_outside_unchanged(&before);
    assert!(!fx.exists("rel-dir") && fx.exists("sub/moved-link"));
    // Reading through a moved link is still confined.
    refused(
        fx,
        "moved-abs",
        dir.read_text("moved-abs").map(|_| ()),
        &OUTSIDE,
    );
    assert_root_intact(fx);
}

// ---------------------------------------------------------------- overwrite

#[test]
fn a_move_never_replaces_a_file_a_folder_or_a_link() {
    a_move_never_replaces_a_file_a_folder_or_a_link_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn a_move_never_replaces_a_file_a_folder_or_a_link_on(fx: &Fixture) {
    fx.plant_links();
    fx.mkdir("empty");
    let dir = fx.project_dir();
    let cases = [
        ("hello.txt", "sub/inner.txt", "'sub/inner.txt' already exists; moving never replaces anything: delete it first or choose another name"),
        ("hello.txt", "empty", "'empty' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'empty/hello.txt'"),
        ("sub", "empty", "'empty' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'empty/sub'"),
        ("sub/deeper", "empty/", "'empty/' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'empty/deeper'"),
        ("sub", "hello.txt", "'hello.txt' already exists; moving never replaces anything: delete it first or choose another name"),
        ("hello.txt", "in-file", "'in-file' already exists; moving never replaces anything: delete it first or choose another name"),
        ("hello.txt", "dangling-in", "'dangling-in' already exists; moving never replaces anything: delete it first or choose another name"),
        ("hello.txt", "hello.txt", "'hello.txt' already exists; moving never replaces anything: delete it first or choose another name"),
        ("hello.txt", ".", "'.' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'hello.txt'"),
        ("hello.txt", "sub/..", "'sub/..' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'hello.txt'"),
        ("hello.txt", "sub/deeper/..", "'sub/deeper/..' does not end in a name: give the path of the file or folder itself, without '.' or '..' at the end"),
    ];
    for (from, to, expected) in cases {
        let message = refused(fx, to, dir.rename(from, to), &REFUSED);
        assert_eq!(message, expected);
    }
    assert_root_intact(fx);
    assert!(fx.names("empty").is_empty());
    assert!(
        !fx.exists("missing.txt"),
        "the dangling link was written through"
    );
}

#[test]
fn only_a_folder_opens_as_a_folder() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    assert!(dir.open_folder("sub").is_ok());
    let Err(error) = dir.open_folder("hello.txt") else {
        panic!("a file opened as a folder");
    };
    assert_eq!(
        error.raw_os_error(),
        Some(rustix::io::Errno::NOTDIR.raw_os_error())
    );
}

#[test]
fn a_folder_cannot_be_moved_into_itself() {
    a_folder_cannot_be_moved_into_itself_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn a_folder_cannot_be_moved_into_itself_on(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    for to in ["sub/x", "sub/deeper/x", "in-dir/x", "sub/up-dir/sub/x"] {
        let message = refused(fx, to, dir.rename("sub", to), &REFUSED);
        assert_eq!(
            message,
            format!("'sub' cannot be moved into itself ('{to}')")
        );
    }
    assert_root_intact(fx);
}

#[test]
fn a_missing_source_or_destination_folder_is_named() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let message = refused(&fx, "x", dir.rename("hello.txt", "a/b/hello.txt"), &REFUSED);
    assert_eq!(
        message,
        "'a/b/hello.txt': the folder 'a/b' does not exist; create it first"
    );
    let message = refused(&fx, "x", dir.rename("missing.txt", "new.txt"), &NOT_FOUND);
    assert_eq!(message, "'missing.txt' does not exist");
    let message = refused(&fx, "x", dir.rename("hello.txt", "new/"), &REFUSED);
    assert_eq!(message, "'new/' names a folder: give the name of a file");
    let message = refused(&fx, "x", dir.rename("hello.txt/", "new"), &REFUSED);
    assert_eq!(
        message,
        "'hello.txt/' is not a folder, or one of the folders on the way is a file"
    );
    assert_root_intact(&fx);
}

#[test]
fn files_and_folders_move_and_rename_with_their_content() {
    files_and_folders_move_and_rename_with_their_content_on(&Fixture::new());
}

/// The test above on any fresh fixture; `nfs_like_tests` runs it on a mount where the
/// kernel refuses `RENAME_NOREPLACE` and `O_TMPFILE`.
pub(super) fn files_and_folders_move_and_rename_with_their_content_on(fx: &Fixture) {
    let dir = fx.project_dir();
    dir.rename("hello.txt", "greeting.txt").unwrap();
    dir.rename("greeting.txt", "sub/deeper/greeting.txt")
        .unwrap();
    dir.rename("sub/", "moved/").unwrap();
    dir.rename("./moved//deeper", "deeper").unwrap();
    assert_eq!(fx.names("."), ["deeper", "moved"]);
    assert_eq!(fx.read("deeper/greeting.txt"), b"hello");
    assert_eq!(fx.read("moved/inner.txt"), b"inner");
    dir.rename("deeper/greeting.txt", "sub\u{2215}x").unwrap();
    assert_eq!(fx.read("sub\u{2215}x"), b"hello");
}

// ---------------------------------------------------------------- delete

#[test]
fn delete_refuses_folders_and_delete_recursive_removes_them() {
    let fx = Fixture::new();
    fx.mkdir("empty");
    let dir = fx.project_dir();
    for path in ["empty", "sub", "sub/", "sub/deeper"] {
        let message = refused(&fx, path, dir.delete(path), &REFUSED);
        assert_eq!(message, format!("'{path}' is a folder, not a file"));
    }
    dir.delete("sub/inner.txt").unwrap();
    refused(&fx, "gone", dir.delete("sub/inner.txt"), &NOT_FOUND);
    refused(
        &fx,
        "gone",
        dir.delete_recursive("sub/inner.txt"),
        &NOT_FOUND,
    );
    dir.delete_recursive("empty").unwrap();
    dir.delete_recursive("sub/").unwrap();
    dir.delete_recursive("hello.txt").unwrap();
    assert!(fx.names(".").is_empty());
    let message = refused(&fx, "gone", dir.delete_recursive("sub"), &NOT_FOUND);
    assert_eq!(message, "'sub' does not exist");
}

#[test]
fn a_recursive_delete_removes_links_inside_as_links_and_never_follows_them() {
    let fx = Fixture::new();
    fx.plant_links();
    fx.write("tree/a/b/c.txt", b"c");
    fx.write("tree/top.txt", b"top");
    fx.symlink("tree/out-dir", "../../../../outside");
    fx.symlink("tree/a/out-abs", fx.outside());
    fx.symlink("tree/a/out-file", fx.outside().join("secret.txt"));
    fx.symlink("tree/a/in-sub", "../../sub");
    fx.symlink("tree/a/b/proc", "/proc/self/root");
    fx.symlink("tree/loop", "loop");
    fx.fifo("tree/a/pipe");
    fx.hard_link_outside("tree/hard", "secret.txt");
    let before = fx.snapshot_outside();
    let dir = fx.project_dir();
    within_deadline("recursive delete with a FIFO", move || {
        dir.delete_recursive("tree")
    })
    .unwrap();
    assert!(!fx.exists("tree"));
    fx.assert_outside_unchanged(&before);
    assert_root_intact(&fx);
}

#[test]
fn names_that_are_not_utf8_are_deleted_with_their_folder() {
    let fx = Fixture::new();
    fx.mkdir("raw");
    fx.write_raw_name(b"raw/bad\xff.txt", b"x");
    fx.write_raw_name(b"raw/\xfe\xfe", b"y");
    fx.project_dir().delete_recursive("raw").unwrap();
    assert!(!fx.exists("raw"));
}

#[test]
fn fifos_and_devices_are_deleted_without_being_opened() {
    let fx = Fixture::new();
    fx.fifo("pipe");
    fx.mkdir("pipes");
    for i in 0..8 {
        fx.fifo(&format!("pipes/p{i}"));
    }
    let device = fx.char_device("null");
    let dir = fx.project_dir();
    within_deadline("deleting FIFOs", move || {
        dir.delete("pipe")?;
        dir.delete_recursive("pipes")?;
        if device {
            dir.delete("null")?;
        }
        Ok::<_, PathError>(())
    })
    .unwrap();
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
}

#[test]
fn a_hundred_nested_folders_are_deleted_and_deeper_trees_are_refused() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    fx.mkdir(&vec!["n"; 100].join("/"));
    fx.write(&format!("{}/leaf.txt", vec!["n"; 100].join("/")), b"leaf");
    dir.delete_recursive("n").unwrap();
    assert!(!fx.exists("n"));
    let deep = vec!["d"; MAX_DELETE_DEPTH + 10].join("/");
    fx.mkdir(&deep);
    let message = refused(&fx, "d", dir.delete_recursive("d"), &REFUSED);
    assert_eq!(
        message,
        format!("'d' holds folders nested more than {MAX_DELETE_DEPTH} deep: delete the deepest ones first")
    );
    dir.delete_recursive(&vec!["d"; 20].join("/")).unwrap();
    dir.delete_recursive("d").unwrap();
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
}

#[test]
fn a_planted_hard_link_is_deleted_as_a_name_and_the_outside_file_stays() {
    let fx = Fixture::new();
    fx.hard_link_outside("linked.txt", "secret.txt");
    let before = fx.snapshot_outside();
    fx.project_dir().delete("linked.txt").unwrap();
    fx.assert_outside_unchanged(&before);
}

// ---------------------------------------------------------------- races

/// A folder inside the tree is swapped, again and again, with a symlink to `outside/` while
/// the tree is deleted. Nothing outside may ever go missing; the same race against a naive
/// path-based delete (the control) does delete outside files, so the race has teeth.
#[test]
fn a_recursive_delete_racing_a_folder_swapped_for_an_outside_link_deletes_nothing_outside() {
    let fx = Fixture::new();
    let before = fx.snapshot_outside();
    let dir = fx.project_dir();
    let mut deleted = 0;
    let race = fx.race_tree_delete(400, false, |fx| match dir.delete_recursive("victim") {
        Ok(()) => deleted += 1,
        Err(error) => fx.assert_clean(&error.to_string()),
    });
    assert_eq!(
        race.losses, 0,
        "files outside the root were deleted: {race:?}"
    );
    assert!(race.flips > 100, "the swapper barely ran: {race:?}");
    assert!(deleted > 300, "too few deletes finished: {deleted} of 400");
    fx.assert_outside_unchanged(&before);

    // The name given to the delete is itself the one being swapped.
    let top = fx.race_tree_delete(200, false, |fx| {
        if let Err(error) = dir.delete_recursive("victim/a") {
            fx.assert_clean(&error.to_string());
        }
    });
    assert_eq!(
        top.losses, 0,
        "files outside the root were deleted: {top:?}"
    );
    fx.assert_outside_unchanged(&before);

    let control = Fixture::new();
    let naive = control.race_tree_delete(3_000, true, |fx| fx.naive_remove_tree("victim"));
    eprintln!("confined: {race:?} ({deleted} finished), {top:?}; naive control: {naive:?}");
    assert!(
        naive.losses > 0,
        "control: the naive delete never lost an outside file, so the race has no teeth: {naive:?}"
    );
}

#[test]
fn moves_racing_a_folder_swapped_for_an_outside_link_never_move_anything_out() {
    let fx = Fixture::new();
    let before = fx.snapshot_outside();
    let dir = fx.project_dir();
    fx.write("swap/inside.txt", b"inside\n");
    fx.write("item.txt", b"item\n");
    let swapper = fx.start_swapper("swap", "../../../outside");
    for _ in 0..2_000 {
        // Into the swapped folder and back out of it: either it is the real folder, or the
        // link is refused as leading outside.
        if dir.rename("item.txt", "swap/item.txt").is_ok() {
            let _ = dir.rename("swap/item.txt", "item.txt");
        }
        if let Err(error) = dir.rename("swap/secret.txt", "stolen.txt") {
            fx.assert_clean(&error.to_string());
        }
    }
    let flips = swapper.stop();
    assert!(flips > 100, "the swapper barely ran ({flips} flips)");
    assert!(!fx.exists("stolen.txt"), "a file was moved in from outside");
    fx.assert_outside_unchanged(&before);
}

/// The moves used where the file system refuses `RENAME_NOREPLACE` (NFS), called directly:
/// the machines the tests run on support the flag, so `rename` never reaches them here.
#[test]
fn without_noreplace_a_file_or_link_is_moved_by_link_and_unlink_and_never_replaces() {
    let fx = Fixture::new();
    fx.plant_links();
    let dir = fx.project_dir();
    let (root, sub) = (
        dir.open_folder(".").unwrap(),
        dir.open_folder("sub").unwrap(),
    );

    move_fallback::link_then_unlink(&root, "hello.txt", &sub, "moved.txt").unwrap();
    assert_eq!(fx.read("sub/moved.txt"), b"hello");
    assert!(!fx.exists("hello.txt"));

    // An existing name, a file or a folder, is refused and both stay as they were.
    fx.write("other.txt", b"other");
    for taken in ["inner.txt", "deeper"] {
        let refused = move_fallback::link_then_unlink(&root, "other.txt", &sub, taken);
        assert_eq!(refused, Err(rustix::io::Errno::EXIST), "{taken}");
    }
    assert_eq!(fx.read("other.txt"), b"other");
    assert_eq!(fx.read("sub/inner.txt"), b"inner");
    assert!(fx.is_dir("sub/deeper"));

    // A link is moved as a link, its target untouched.
    move_fallback::link_then_unlink(&root, "abs-file", &sub, "abs-file").unwrap();
    let moved = rustix::fs::readlinkat(&sub, "abs-file", Vec::new()).unwrap();
    assert_eq!(
        moved.to_str().unwrap(),
        fx.outside().join("secret.txt").to_str().unwrap()
    );
    assert!(!fx.exists("abs-file"));
}

#[test]
fn without_noreplace_a_folder_moves_only_to_a_free_name() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let root = dir.open_folder(".").unwrap();
    fx.mkdir("empty");
    fx.write("file.txt", b"file");

    for taken in ["empty", "file.txt"] {
        let refused = move_fallback::rename_if_free(&root, "sub", &root, taken);
        assert_eq!(refused, Err(rustix::io::Errno::EXIST), "{taken}");
    }
    assert!(fx.is_dir("empty") && fx.names("empty").is_empty());
    assert_eq!(fx.read("file.txt"), b"file");

    move_fallback::rename_if_free(&root, "sub", &root, "moved").unwrap();
    assert_eq!(fx.read("moved/inner.txt"), b"inner");
    assert!(!fx.exists("sub"));
}
