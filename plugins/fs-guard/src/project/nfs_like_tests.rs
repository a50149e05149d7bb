//! `ProjectDir` on a file system that behaves like NFS for the two primitives where NFS
//! differs (docs/deploy.md, "On NFS"): a FUSE mount ([`NfsLikeMount`]) whose kernel refuses
//! `renameat2(RENAME_NOREPLACE)` with `EINVAL` and has no `O_TMPFILE`. Each test first proves
//! the kernel really refuses them there, so moves go through `move_fallback` and writes
//! through a named temp file; then it runs the same suites as on the local disk (the `_on`
//! functions of `tests` and `change_tests`) on a fixture built inside the mount.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rojos_plugin_api::ErrorKind;
use rustix::fs::{Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;

use super::nfs_like_mount::NfsLikeMount;
use super::{bytes_tests, change_tests, tests};
use crate::testing::Fixture;

const REFUSED: ErrorKind = ErrorKind::REFUSED;

/// Runs each of `suites` on its own fresh fixture built inside one NFS-like mount, after
/// checking that the fixture is on the mount and that the kernel refuses the two primitives
/// there. Each fixture is removed before the mount is dropped (unmounted), also when a suite
/// panics.
fn on_nfs_like_mount(suites: &[fn(&Fixture)]) {
    let mount = NfsLikeMount::start();
    for suite in suites {
        let fx = Fixture::new_in(mount.path());
        assert_on_the_mount(&mount, &fx);
        assert_kernel_refuses_noreplace_and_tmpfile(&fx);
        suite(&fx);
    }
}

/// The fixture's root is on the FUSE file system, not on the folder that holds the mount.
fn assert_on_the_mount(mount: &NfsLikeMount, fx: &Fixture) {
    let device = |path: &std::path::Path| fs::metadata(path).expect("stat").dev();
    let above = mount.path().parent().expect("the mount point has a parent");
    assert_ne!(
        device(fx.root()),
        device(above),
        "the fixture is not on the FUSE mount"
    );
}

/// One direct call each: `renameat2(RENAME_NOREPLACE)` to a free name is refused with
/// `EINVAL` and moves nothing, and `O_TMPFILE` is refused with `EOPNOTSUPP`. So every move
/// the suites make goes through the fallback, and every write through a named temp file.
fn assert_kernel_refuses_noreplace_and_tmpfile(fx: &Fixture) {
    let probe = rustix::fs::renameat_with(
        CWD,
        fx.path("hello.txt"),
        CWD,
        fx.path("probe-free-name"),
        RenameFlags::NOREPLACE,
    );
    assert_eq!(
        probe,
        Err(Errno::INVAL),
        "the mount must refuse RENAME_NOREPLACE as NFS does"
    );
    assert!(fx.exists("hello.txt") && !fx.exists("probe-free-name"));
    let tmpfile = rustix::fs::openat(
        CWD,
        fx.root(),
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from(0o600),
    );
    assert_eq!(
        tmpfile.err(),
        Some(Errno::OPNOTSUPP),
        "the mount must have no O_TMPFILE, as NFS"
    );
}

#[test]
fn on_nfs_like_mount_files_links_and_folders_move_through_the_fallback() {
    on_nfs_like_mount(&[
        change_tests::files_and_folders_move_and_rename_with_their_content_on,
        change_tests::a_symlink_is_moved_as_a_link_and_still_refused_where_it_leads_out_on,
        a_moved_file_keeps_its_inode_and_only_its_new_name,
    ]);
}

/// The file is the same inode under its new name, and its old name is gone: the fallback
/// linked it and removed the old name (no copy, no leftover). Its link count is not checked:
/// the kernel caches a FUSE file's attributes for a second (NFS too), so it may still say 2.
fn a_moved_file_keeps_its_inode_and_only_its_new_name(fx: &Fixture) {
    let before = fs::symlink_metadata(fx.path("hello.txt")).expect("stat hello.txt");
    fx.project_dir()
        .rename("hello.txt", "sub/deeper/moved.txt")
        .expect("move a file on the mount");
    let after = fs::symlink_metadata(fx.path("sub/deeper/moved.txt")).expect("stat moved");
    assert_eq!(after.ino(), before.ino());
    assert!(!fx.exists("hello.txt"));
    assert_eq!(fx.names("sub/deeper"), ["moved.txt"]);
}

#[test]
fn on_nfs_like_mount_a_move_never_replaces_anything() {
    on_nfs_like_mount(&[
        change_tests::a_move_never_replaces_a_file_a_folder_or_a_link_on,
        change_tests::rename_never_moves_anything_out_or_over_an_existing_name_on,
        a_name_that_appears_during_the_move_is_never_replaced,
    ]);
}

/// The script's hook (see its doc) creates the destination after the kernel saw it free and
/// refused the flag, as another NFS client might: the fallback still never replaces it.
fn a_name_that_appears_during_the_move_is_never_replaced(fx: &Fixture) {
    fx.plant_links();
    let dir = fx.project_dir();
    let cases = [
        ("hello.txt", "appears-file", "'appears-file' already exists; moving never replaces anything: delete it first or choose another name"),
        ("in-file", "appears-link", "'appears-link' already exists; moving never replaces anything: delete it first or choose another name"),
        ("sub", "appears-dir", "'appears-dir' already exists and is a folder; moving never replaces anything: to move into that folder, give the full new path, such as 'appears-dir/sub'"),
    ];
    for (from, to, expected) in cases {
        let message = change_tests::refused(fx, to, dir.rename(from, to), &REFUSED);
        assert_eq!(message, expected);
    }
    assert_eq!(fx.read("appears-file"), b"other client");
    assert_eq!(fx.read("appears-link"), b"other client");
    assert!(
        fx.names("appears-dir").is_empty(),
        "the folder was replaced"
    );
    assert_eq!(fx.read("hello.txt"), b"hello");
    assert_eq!(
        fs::read_link(fx.path("in-file")).expect("in-file is a link"),
        std::path::Path::new("hello.txt")
    );
    assert_eq!(fx.names("sub"), ["deeper", "inner.txt", "up", "up-dir"]);
}

#[test]
fn on_nfs_like_mount_a_folder_moved_into_itself_is_refused_as_on_a_local_disk() {
    on_nfs_like_mount(&[change_tests::a_folder_cannot_be_moved_into_itself_on]);
}

#[test]
fn on_nfs_like_mount_writes_replace_whole_files_and_leave_no_temp_file() {
    on_nfs_like_mount(&[
        tests::a_write_leaves_no_temporary_file_and_keeps_the_old_mode_on,
        tests::a_planted_hard_link_reads_the_outside_file_but_a_write_replaces_only_the_name_on,
        a_reader_sees_only_whole_files_while_they_are_rewritten,
    ]);
}

#[test]
fn on_nfs_like_mount_an_upload_never_replaces_a_file() {
    on_nfs_like_mount(&[
        bytes_tests::write_bytes_creates_a_new_file_with_any_content_and_its_folders_on,
        bytes_tests::write_bytes_never_replaces_a_file_that_appears_after_the_check_on,
    ]);
}

/// While `hello.txt` is rewritten with two different 64 KiB texts, a reader opening it again
/// and again always gets one of them whole: the new content appears by one rename. An open
/// racing the rename may fail with `ENOENT` or `ESTALE` (libfuse's path-based API cannot open
/// the old file once a rename replaced its name, though the kernel still had it; NFS gives
/// `ESTALE` there too): a failed open, never a partial file, so it is only skipped.
fn a_reader_sees_only_whole_files_while_they_are_rewritten(fx: &Fixture) {
    let texts = ["a".repeat(64 * 1024), "b".repeat(64 * 1024)];
    let dir = fx.project_dir();
    dir.write_text("hello.txt", &texts[0]).expect("first write");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, path, texts) = (Arc::clone(&stop), fx.path("hello.txt"), texts.clone());
        std::thread::spawn(move || {
            let mut reads = 0_u32;
            while !stop.load(Ordering::SeqCst) {
                let seen = match fs::read_to_string(&path) {
                    Ok(seen) => seen,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) if e.raw_os_error() == Some(Errno::STALE.raw_os_error()) => continue,
                    Err(e) => panic!("reading during rewrites: {e}"),
                };
                assert!(
                    texts.contains(&seen),
                    "a reader saw {} bytes starting {:?}",
                    seen.len(),
                    seen.get(..8)
                );
                reads += 1;
            }
            reads
        })
    };
    for round in 0..40 {
        dir.write_text("hello.txt", &texts[round % 2])
            .expect("rewrite on the mount");
    }
    stop.store(true, Ordering::SeqCst);
    let reads = reader.join().expect("the reader thread failed");
    assert!(reads > 0, "the reader never ran");
    assert_eq!(names_once_released(fx), ["hello.txt", "sub"]);
}

/// The root's names once the mount has let go of files a reader still held when a rename
/// replaced them. Such a file lives on under a hidden name (libfuse's `.fuse_hidden…`, as
/// NFS's "silly rename" `.nfs…`) until the mount handles the close, which the kernel sends
/// after `close` has returned; so those names may be seen for a moment after the reader
/// ended, and are waited out (up to 10 s). Any other extra name, such as a temp file of
/// ours, stays and fails the comparison.
fn names_once_released(fx: &Fixture) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let names = fx.names(".");
        let held = names.iter().any(|name| name.starts_with(".fuse_hidden"));
        if !held || std::time::Instant::now() > deadline {
            return names;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn on_nfs_like_mount_hostile_paths_are_still_refused() {
    on_nfs_like_mount(&[
        tests::read_text_never_reaches_outside_the_root_on,
        tests::meta_never_reaches_outside_the_root_on,
        tests::list_never_reaches_outside_the_root_on,
        tests::write_text_never_creates_or_changes_anything_outside_on,
        tests::create_dir_never_creates_anything_outside_on,
        tests::delete_and_rename_never_touch_anything_outside_on,
        change_tests::delete_never_touches_anything_outside_or_the_root_on,
        change_tests::rename_never_moves_anything_from_outside_or_the_root_on,
        change_tests::the_root_itself_cannot_be_deleted_or_moved_even_as_a_path_that_resolves_to_it_on,
    ]);
}
