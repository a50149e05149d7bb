//! Tests of [`StagedWrite`], the upload path: pieces go to a temporary file beneath the root
//! and take the name only at the commit; a dropped staged write leaves nothing, not even the
//! folders it would have created; the limit, `IfExists` and the hostile paths hold as for
//! `write_bytes`.

use rojos_plugin_api::{ErrorKind, Limits, ToolError};

use super::*;
use crate::testing::{Fixture, WRITE_ESCAPES};

fn temporaries(fx: &Fixture, folder: &str) -> Vec<String> {
    fx.names(folder)
        .into_iter()
        .filter(|name| name.starts_with(".rojos-new-"))
        .collect()
}

#[test]
fn pieces_take_the_name_only_at_the_commit() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let mut staged = dir.stage_write("sub/up.bin", IfExists::Refuse).unwrap();
    staged.write(b"first ").unwrap();
    staged.write(b"\0second").unwrap();
    assert_eq!(staged.written(), 13);
    assert!(!fx.exists("sub/up.bin"));
    assert_eq!(temporaries(&fx, "sub").len(), 1);
    let written = staged.commit().unwrap();
    assert!(!written.replaced);
    assert_eq!(fx.read("sub/up.bin"), b"first \0second");
    assert!(temporaries(&fx, "sub").is_empty());
}

#[test]
fn a_dropped_staged_write_leaves_no_file_and_no_new_folder() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let mut staged = dir
        .stage_write("new/deeper/up.bin", IfExists::Refuse)
        .unwrap();
    staged.write(&[7; 1000]).unwrap();
    // Waiting in the root: the folders do not exist yet.
    assert_eq!(temporaries(&fx, ".").len(), 1);
    assert!(!fx.exists("new"));
    drop(staged);
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);

    let mut staged = dir
        .stage_write("new/deeper/up.bin", IfExists::Refuse)
        .unwrap();
    staged.write(&[7; 1000]).unwrap();
    staged.commit().unwrap();
    assert_eq!(fx.read("new/deeper/up.bin"), vec![7; 1000]);
    assert!(temporaries(&fx, ".").is_empty());
}

#[test]
fn the_write_limit_counts_every_piece() {
    let fx = Fixture::new();
    let dir = fx.project_dir_with(Limits {
        max_write_bytes: 10,
        ..Limits::default()
    });
    let mut staged = dir.stage_write("up.bin", IfExists::Refuse).unwrap();
    staged.write(&[1; 6]).unwrap();
    let error = ToolError::from(staged.write(&[1; 5]).unwrap_err());
    assert_eq!(error.kind, ErrorKind::TOO_LARGE);
    assert_eq!(
        error.message,
        "text is 11 bytes, over the write limit of 10 bytes"
    );
    drop(staged);
    assert!(!fx.exists("up.bin"));
    assert!(temporaries(&fx, ".").is_empty());
}

#[test]
fn refuse_never_replaces_a_file_even_one_made_while_the_pieces_came() {
    let fx = Fixture::new();
    let dir = fx.project_dir();
    let early = dir.stage_write("hello.txt", IfExists::Refuse).unwrap_err();
    assert!(matches!(early, PathError::AlreadyExists { .. }), "{early}");

    let mut staged = dir.stage_write("late.txt", IfExists::Refuse).unwrap();
    staged.write(b"mine").unwrap();
    fx.write("late.txt", b"theirs");
    let late = staged.commit().unwrap_err();
    assert!(matches!(late, PathError::AlreadyExists { .. }), "{late}");
    assert_eq!(fx.read("late.txt"), b"theirs");
    assert!(temporaries(&fx, ".").is_empty());
}

#[test]
fn replace_keeps_the_mode_without_setuid() {
    let fx = Fixture::new();
    fx.write("run.sh", b"old");
    fx.chmod("run.sh", 0o4755);
    let dir = fx.project_dir();
    let mut staged = dir.stage_write("run.sh", IfExists::Replace).unwrap();
    staged.write(b"new").unwrap();
    assert!(staged.commit().unwrap().replaced);
    assert_eq!(fx.read("run.sh"), b"new");
    assert_eq!(fx.mode("run.sh"), 0o755);
}

#[test]
fn hostile_paths_are_refused_before_anything_is_staged() {
    let fx = Fixture::new();
    fx.plant_links();
    let before = fx.snapshot_outside();
    let dir = fx.project_dir();
    for (path, kind) in WRITE_ESCAPES {
        let error = ToolError::from(dir.stage_write(path, IfExists::Replace).unwrap_err());
        assert_eq!(&error.kind, kind, "{path:?}: {}", error.message);
        fx.assert_clean(&error.message);
    }
    fx.assert_outside_unchanged(&before);
    assert!(temporaries(&fx, ".").is_empty());
}
