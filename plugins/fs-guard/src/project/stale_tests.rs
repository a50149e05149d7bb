//! Tests of the version-checked replacement (`IfExists::ReplaceIfVersion`, docs/tools.md
//! "Stale writes"): the expected content is replaced keeping its mode; other content, a
//! missing file or folder, a file over the read limit, a symlink or a FIFO at the name are
//! refused, leaving the file as it was, creating nothing and leaving no temporary name.

use rojos_plugin_api::{ErrorKind, Limits, ToolError};

use super::*;
use crate::testing::{Fixture, WRITE_ESCAPES};
use crate::ContentVersion;

fn write_if(
    fx: &Fixture,
    path: &str,
    text: &str,
    expected: ContentVersion,
) -> Result<Written, PathError> {
    fx.project_dir()
        .write_bytes(path, text.as_bytes(), IfExists::ReplaceIfVersion(expected))
}

fn refusal(result: Result<Written, PathError>) -> (ErrorKind, String) {
    let error = ToolError::from(result.expect_err("refused"));
    (error.kind, error.message)
}

#[test]
fn the_expected_content_is_replaced_keeping_its_mode() {
    let fx = Fixture::new();
    fx.chmod("sub/inner.txt", 0o640);
    let read = fx.project_dir().read_text("sub/inner.txt").unwrap();
    let written = write_if(
        &fx,
        "sub/inner.txt",
        "new",
        ContentVersion::of(read.as_bytes()),
    )
    .unwrap();
    assert!(written.replaced);
    assert_eq!(fx.read("sub/inner.txt"), b"new");
    assert_eq!(fx.mode("sub/inner.txt"), 0o640);
    assert_eq!(fx.names("sub"), ["deeper", "inner.txt"]);
}

#[test]
fn other_content_is_refused_naming_both_versions_and_left_as_it_is() {
    let fx = Fixture::new();
    let read = ContentVersion::of(b"hello");
    fx.write("hello.txt", b"hello, edited by hand");
    let now = ContentVersion::of(b"hello, edited by hand");
    let (kind, message) = refusal(write_if(&fx, "hello.txt", "model's text", read));
    assert_eq!(kind, ErrorKind::STALE);
    assert_eq!(
        message,
        format!(
            "'hello.txt' was not written: it changed since you read it (expected version {read}, \
             it is now {now}); read it again with get_text_content (with_version: true) and make \
             your change to the current text"
        )
    );
    assert_eq!(fx.read("hello.txt"), b"hello, edited by hand");
    assert_eq!(
        fx.names("."),
        ["hello.txt", "sub"],
        "a temporary file was left"
    );
}

#[test]
fn a_missing_file_or_folder_is_gone_and_nothing_is_created() {
    let fx = Fixture::new();
    let version = ContentVersion::of(b"hello");
    for path in ["gone.txt", "new-folder/deeper/gone.txt"] {
        let (kind, message) = refusal(write_if(&fx, path, "text", version));
        assert_eq!(kind, ErrorKind::STALE, "{path}");
        assert!(
            message.contains("it no longer exists") && message.contains("without expected_version"),
            "{path}: {message}"
        );
    }
    assert_eq!(fx.names("."), ["hello.txt", "sub"]);
}

#[test]
fn a_file_grown_over_the_read_limit_is_stale() {
    let fx = Fixture::new();
    fx.sized_file("big.txt", 11);
    let dir = fx.project_dir_with(Limits {
        max_read_bytes: 10,
        ..Limits::default()
    });
    let version = ContentVersion::of(b"0123456789");
    let result = dir.write_bytes("big.txt", b"x", IfExists::ReplaceIfVersion(version));
    let (kind, message) = refusal(result);
    assert_eq!(kind, ErrorKind::STALE);
    assert!(message.contains("over the read limit"), "{message}");
    assert_eq!(fx.read("big.txt").len(), 11);
}

#[test]
fn symlinks_fifos_folders_and_escapes_are_refused_as_for_any_write() {
    let fx = Fixture::new();
    fx.plant_links();
    fx.fifo("pipe");
    let version = ContentVersion::of(b"hello");
    let before = fx.snapshot_outside();
    // In-root link: its target is named, as an unchecked write does; the target is untouched.
    let (kind, message) = refusal(write_if(&fx, "in-file", "x", version));
    assert_eq!(kind, ErrorKind::REFUSED, "{message}");
    assert_eq!(fx.read("hello.txt"), b"hello");
    for path in ["pipe", "sub"] {
        let (kind, message) = refusal(write_if(&fx, path, "x", version));
        assert_eq!(kind, ErrorKind::REFUSED, "{path}: {message}");
    }
    for (path, _) in WRITE_ESCAPES {
        let result = write_if(&fx, path, "x", version);
        assert!(result.is_err(), "{path} was written");
        fx.assert_clean(&ToolError::from(result.unwrap_err()).message);
    }
    fx.assert_outside_unchanged(&before);
}
