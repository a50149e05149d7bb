//! Tests of `snapshot` and `restore`: a file, a folder tree with modes and a link, missing
//! folders on the way, the byte limit, and hostile layouts (a folder swapped for a symlink
//! that leads out, a special file).

// The test world is built and inspected with the ambient file API, as `testing` does.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;

use rojos_plugin_api::ErrorKind;

use super::*;
use crate::testing::{Fixture, LEAK_MARKER};

const MAX: u64 = 1 << 20;

fn mode(fx: &Fixture, rel: &str) -> u32 {
    std::fs::symlink_metadata(fx.path(rel))
        .expect("stat")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_replaced_file_comes_back_with_its_bytes_and_mode() {
    let fx = Fixture::new();
    fx.write("notes.txt", b"before\n");
    std::fs::set_permissions(fx.path("notes.txt"), std::fs::Permissions::from_mode(0o751))
        .expect("chmod");
    let dir = fx.project_dir();
    let recorded = dir.snapshot("./notes.txt", MAX).expect("snapshot");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "notes.txt");
    dir.write_text("notes.txt", "after").expect("write");
    dir.restore(&recorded[0].path, &recorded[0].node)
        .expect("restore");
    assert_eq!(fx.read("notes.txt"), b"before\n");
    assert_eq!(mode(&fx, "notes.txt"), 0o751);
}

#[test]
fn missing_folders_on_the_way_are_recorded_as_absent_and_removed_again() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let recorded = dir.snapshot("new/deep/file.txt", MAX).expect("snapshot");
    let paths: Vec<&str> = recorded.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["new", "new/deep", "new/deep/file.txt"]);
    assert!(recorded.iter().all(|r| r.node == Node::Absent));
    dir.write_text("new/deep/file.txt", "x").expect("write");
    for r in recorded.iter().rev() {
        dir.restore(&r.path, &r.node).expect("restore");
    }
    assert!(!fx.exists("new"));
}

#[test]
fn folders_on_the_way_are_looked_at_only_as_far_as_the_path_resolves_the_same() {
    // Where the entry's folder opens, nothing on the way is missing; where it does not, each
    // missing folder is named, with `.` and empty parts left out as before.
    let fx = Fixture::new();
    fx.mkdir("docs/intro");
    fx.write("docs/intro/page.md", b"x");
    fx.write("plain.txt", b"not a folder");
    let dir = fx.project_dir();
    let paths = |path: &str| -> Vec<String> {
        dir.snapshot(path, MAX)
            .expect(path)
            .into_iter()
            .map(|r| r.path)
            .collect()
    };
    assert_eq!(paths("docs/intro/page.md"), ["docs/intro/page.md"]);
    assert_eq!(paths("./docs//./intro/page.md"), ["docs/intro/page.md"]);
    assert_eq!(
        paths("docs/intro/../intro/page.md"),
        ["docs/intro/../intro/page.md"]
    );
    assert_eq!(
        paths("./docs/./guide//part/page.md"),
        ["docs/guide", "docs/guide/part", "docs/guide/part/page.md"]
    );
    // A file on the way: the folder cannot open, and the walk says why.
    assert!(matches!(
        dir.snapshot("plain.txt/page.md", MAX),
        Err(PathError::NotADirectory { .. })
    ));
    // A link on the way that leads out of the root refuses, whether or not its target exists.
    fx.symlink("out", "/");
    assert!(matches!(
        dir.snapshot("out/etc/passwd", MAX),
        Err(PathError::Outside { .. })
    ));
}

#[test]
fn a_creation_records_only_what_is_missing_and_reads_nothing_that_exists() {
    let fx = Fixture::new();
    fx.mkdir("big");
    fx.write("big/content.bin", &[7u8; 4096]);
    let dir = fx.project_dir();
    // Over any budget as a whole, but a creation there changes nothing: nothing recorded.
    assert_eq!(dir.snapshot_creation("big").expect("existing"), Vec::new());
    assert_eq!(dir.snapshot_creation("big/").expect("existing"), Vec::new());
    assert!(
        dir.snapshot("big", 100).is_err(),
        "the whole folder is over 100 bytes"
    );
    let recorded = dir.snapshot_creation("big/new/deeper").expect("missing");
    let paths: Vec<&str> = recorded.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["big/new", "big/new/deeper"]);
    assert!(recorded.iter().all(|r| r.node == Node::Absent));
    dir.create_dir("big/new/deeper").expect("mkdir");
    for r in recorded.iter().rev() {
        dir.restore(&r.path, &r.node).expect("restore");
    }
    assert!(!fx.exists("big/new"));
    assert_eq!(fx.read("big/content.bin"), vec![7u8; 4096]);
    assert!(matches!(
        dir.snapshot_creation("../outside"),
        Err(PathError::Outside { .. })
    ));
}

#[test]
fn a_deleted_folder_tree_comes_back_with_files_modes_and_links() {
    let fx = Fixture::new();
    fx.mkdir("tree/inner");
    fx.write("tree/a.txt", b"a");
    fx.write("tree/inner/b.bin", &[0, 159, 146, 150]);
    fx.symlink("tree/link", "a.txt");
    std::fs::set_permissions(
        fx.path("tree/inner"),
        std::fs::Permissions::from_mode(0o750),
    )
    .expect("chmod");
    let dir = fx.project_dir();
    let recorded = dir.snapshot("tree/", MAX).expect("snapshot");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].node.content_bytes(), 1 + 4 + 5);
    dir.delete_recursive("tree").expect("delete");
    dir.restore(&recorded[0].path, &recorded[0].node)
        .expect("restore");
    assert_eq!(fx.read("tree/a.txt"), b"a");
    assert_eq!(fx.read("tree/inner/b.bin"), [0, 159, 146, 150]);
    assert_eq!(mode(&fx, "tree/inner"), 0o750);
    let link = std::fs::read_link(fx.path("tree/link")).expect("still a link");
    assert_eq!(link.to_str(), Some("a.txt"));
}

#[test]
fn a_snapshot_over_its_limit_is_refused_as_too_large() {
    let fx = Fixture::new();
    fx.mkdir("big");
    fx.write("big/one", &[b'x'; 60]);
    fx.write("big/two", &[b'y'; 60]);
    let error = fx
        .project_dir()
        .snapshot("big", 100)
        .expect_err("over the limit");
    assert_eq!(error.kind(), ErrorKind::TOO_LARGE);
    assert!(error.to_string().contains("100 bytes"), "{error}");
    assert!(fx.project_dir().snapshot("big", 120).is_ok());
}

#[test]
fn a_fifo_cannot_be_recorded() {
    let fx = Fixture::new();
    fx.mkdir("pipes");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fx.path("pipes/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let error = fx.project_dir().snapshot("pipes", MAX).expect_err("a FIFO");
    assert!(matches!(error, PathError::NotUndoable { .. }), "{error}");
}

#[test]
fn a_folder_swapped_for_a_link_out_cannot_make_restore_write_outside() {
    let fx = Fixture::new();
    fx.mkdir("docs");
    fx.write("docs/x", b"inside");
    let dir = fx.project_dir();
    let recorded = dir.snapshot("docs/x", MAX).expect("snapshot");
    std::fs::remove_dir_all(fx.path("docs")).expect("remove docs");
    fx.symlink("docs", fx.outside().join("dir"));
    let error = dir
        .restore(&recorded[0].path, &recorded[0].node)
        .expect_err("outside");
    assert_eq!(error.kind(), ErrorKind::OUTSIDE_ROOT, "{error}");
    let outside = std::fs::read(fx.outside().join("dir/x")).expect("marker file");
    assert!(String::from_utf8_lossy(&outside).contains(LEAK_MARKER));
}

#[test]
fn a_recorded_folder_replaced_by_a_link_is_restored_as_a_folder_without_following_it() {
    let fx = Fixture::new();
    fx.mkdir("docs");
    fx.write("docs/x", b"inside");
    let dir = fx.project_dir();
    let recorded = dir.snapshot("docs", MAX).expect("snapshot");
    std::fs::remove_dir_all(fx.path("docs")).expect("remove docs");
    fx.symlink("docs", fx.outside().join("dir"));
    dir.restore(&recorded[0].path, &recorded[0].node)
        .expect("restore");
    assert!(std::fs::symlink_metadata(fx.path("docs"))
        .expect("stat")
        .is_dir());
    assert_eq!(fx.read("docs/x"), b"inside");
    assert!(
        fx.outside().join("dir/x").exists(),
        "the link's target was touched"
    );
}

#[test]
fn dotted_paths_are_not_entries_and_the_root_records_nothing() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    assert!(matches!(
        dir.snapshot("sub/..", MAX),
        Err(PathError::NotAnEntry { .. })
    ));
    assert_eq!(dir.snapshot(".", MAX).expect("root"), Vec::new());
    assert_eq!(
        dir.snapshot("../x", MAX).expect_err("outside").kind(),
        ErrorKind::OUTSIDE_ROOT
    );
}
