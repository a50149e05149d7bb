//! Syntactic checks on the model's path string, the step before any file system call. They only give clear messages and refuse names the model may not create;
//! confinement itself is the kernel's job through `cap-std` (`..` is left to it). Nothing is
//! trimmed, percent-decoded, `~`-expanded or Unicode-normalised.

use crate::error::{PathError, Shown};
pub use crate::limits::{MAX_NAME_BYTES, MAX_PATH_BYTES};

/// Whether the path names something that must exist, or something the model creates (which
/// also refuses invisible characters: [`crate::names::is_invisible`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathUse {
    /// Read, stat, list, delete: the name exists already.
    Existing,
    /// Write, create a folder, move destination: the name may be new.
    Create,
}

/// A path string that passed [`check_path`]: relative, still unresolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelPath<'a>(&'a str);

/// A checked path cut into the folder that holds the last name, and that name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Split<'a> {
    /// The path is the root itself (`.`, `./`, `.//.`).
    Root,
    /// The last part is `..`, `.` or empty (trailing `/`): it names a folder, not an entry.
    NotAName,
    /// `parent` (a relative path, `.` for the root) holds the entry `leaf`.
    Named {
        /// The folder's path, as the model wrote it minus empty and `.` parts.
        parent: String,
        /// The last name: never empty, `.` or `..`.
        leaf: &'a str,
    },
}

/// A checked path cut for a move or a delete, which act on an entry itself: trailing `/` are
/// allowed (they say the entry must be a folder), a last part `.` or `..` is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    /// The path is the root itself (`.`, `./`, `.//.`).
    Root,
    /// The last part (after trailing `/`) is `.` or `..`: it resolves to some folder, maybe
    /// the root, but does not name an entry of its parent.
    Dotted,
    /// `parent` (a relative path, `.` for the root) holds the entry `leaf`.
    Named {
        /// The folder's path, as the model wrote it minus empty and `.` parts.
        parent: String,
        /// The last name: never empty, `.` or `..`, never holds `/`.
        leaf: &'a str,
        /// The path ended in `/`: the entry must be a folder.
        dir_only: bool,
    },
}

impl<'a> RelPath<'a> {
    /// The path as the model wrote it.
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// Cuts the path into parent folder and last name.
    pub(crate) fn split(&self) -> Split<'a> {
        let parts: Vec<&'a str> = self.0.split('/').collect();
        if parts.iter().all(|p| p.is_empty() || *p == ".") {
            return Split::Root;
        }
        let (leaf, parents) = match parts.split_last() {
            Some((leaf, parents)) => (*leaf, parents),
            None => return Split::Root,
        };
        if leaf.is_empty() || leaf == "." || leaf == ".." {
            return Split::NotAName;
        }
        let parent: Vec<&str> = parents
            .iter()
            .copied()
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        let parent = if parent.is_empty() {
            ".".to_owned()
        } else {
            parent.join("/")
        };
        Split::Named { parent, leaf }
    }

    /// Cuts the path into parent folder and the entry it names, for a move or a delete.
    pub(crate) fn entry(&self) -> Entry<'a> {
        let trimmed = self.0.trim_end_matches('/');
        let dir_only = trimmed.len() != self.0.len();
        match RelPath(trimmed).split() {
            Split::Root => Entry::Root,
            Split::NotAName => Entry::Dotted,
            Split::Named { parent, leaf } => Entry::Named {
                parent,
                leaf,
                dir_only,
            },
        }
    }
}

/// Checks the model's `path` for `use_`: non-empty, relative, at most [`MAX_PATH_BYTES`] and
/// [`MAX_NAME_BYTES`] per name, no NUL, no backslash, no drive prefix; for
/// [`PathUse::Create`] also no invisible character ([`crate::names::is_invisible`]: controls,
/// format characters such as zero-width spaces and bidirectional controls, separators).
///
/// # Errors
///
/// [`PathError::Outside`] for absolute and drive-prefixed paths, otherwise an
/// invalid-arguments [`PathError`] saying what to fix.
pub fn check_path(path: &str, use_: PathUse) -> Result<RelPath<'_>, PathError> {
    let shown = || Shown::new(path);
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.starts_with('/') || has_drive_prefix(path) {
        return Err(PathError::Outside { path: shown() });
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::PathTooLong { len: path.len() });
    }
    if path.contains('\0') {
        return Err(PathError::Nul { path: shown() });
    }
    if path.contains('\\') {
        return Err(PathError::Backslash { path: shown() });
    }
    if path.split('/').any(|name| name.len() > MAX_NAME_BYTES) {
        return Err(PathError::NameTooLong { path: shown() });
    }
    if use_ == PathUse::Create {
        if let Some(c) = crate::names::first_invisible(path) {
            return Err(PathError::ForbiddenChar {
                path: shown(),
                code: c as u32,
            });
        }
    }
    Ok(RelPath(path))
}

/// `C:`, `c:` …: a Windows drive, absolute in the model's mind.
fn has_drive_prefix(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_plugin_api::ErrorKind;

    fn refusal(path: &str, use_: PathUse) -> (ErrorKind, String) {
        let error = check_path(path, use_).expect_err(path);
        (error.kind(), error.to_string())
    }

    #[test]
    fn empty_path_is_refused_with_a_hint_to_use_dot() {
        assert_eq!(
            refusal("", PathUse::Existing),
            (
                ErrorKind::INVALID_ARGUMENTS,
                "path is empty: use '.' for the project root".to_owned()
            )
        );
    }

    #[test]
    fn absolute_and_drive_paths_lead_outside_the_project() {
        for path in ["/etc/passwd", "/", "//x", "C:\\x", "c:x", "Z:/x"] {
            let (kind, message) = refusal(path, PathUse::Existing);
            assert_eq!(kind, ErrorKind::OUTSIDE_ROOT, "{path}");
            assert!(message.contains("leads outside the project"), "{message}");
        }
    }

    #[test]
    fn backslashes_nul_and_long_names_are_invalid_arguments() {
        let long_name = "n".repeat(256);
        let long_path = "a/".repeat(2049);
        let cases: [(&str, &str); 4] = [
            ("a\\b", "contains a backslash"),
            ("a\0b", "contains a NUL character"),
            (&long_name, "name too long"),
            (
                &long_path,
                "path is 4098 bytes long, over the limit of 4096 bytes",
            ),
        ];
        for (path, expected) in cases {
            let (kind, message) = refusal(path, PathUse::Existing);
            assert_eq!(kind, ErrorKind::INVALID_ARGUMENTS, "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn a_path_of_exactly_the_limit_passes_the_check() {
        let path = format!("{}/{}", "a".repeat(200), "b/".repeat(1947)) + "c";
        assert_eq!(path.len(), MAX_PATH_BYTES);
        assert!(check_path(&path, PathUse::Create).is_ok());
        assert!(check_path(&format!("{path}d"), PathUse::Create).is_err());
    }

    #[test]
    fn a_name_of_exactly_255_bytes_passes_the_check() {
        let name = "n".repeat(255);
        assert!(check_path(&name, PathUse::Create).is_ok());
    }

    #[test]
    fn literal_lookalikes_tilde_and_percent_escapes_pass_unchanged() {
        for path in [
            "~/x",
            "%2e%2e/x",
            "\u{2025}/x",
            "\u{ff0e}\u{ff0e}/x",
            "a\u{2215}b",
            "..",
        ] {
            assert_eq!(
                check_path(path, PathUse::Create).map(|p| p.as_str()).ok(),
                Some(path)
            );
        }
    }

    #[test]
    fn control_bidi_and_invisible_format_characters_are_refused_only_in_created_names() {
        for path in [
            "a\u{1}b",
            "a\nb",
            "a\u{7f}",
            "a\u{85}",
            "x\u{202e}txt.exe",
            "\u{2066}a",
            "\u{200f}",
            "zero\u{200b}width.txt",
            "dir\u{2060}/x",
            "\u{feff}bom",
            "soft\u{ad}hyphen",
            "tag\u{e0041}",
            "line\u{2028}sep",
            "filler\u{3164}",
        ] {
            let (kind, message) = refusal(path, PathUse::Create);
            assert_eq!(kind, ErrorKind::INVALID_ARGUMENTS);
            assert!(
                message.contains("new names may not contain control"),
                "{message}"
            );
            assert!(check_path(path, PathUse::Existing).is_ok(), "{path:?}");
        }
    }

    #[test]
    fn split_finds_the_parent_folder_and_the_last_name() {
        let split = |p| check_path(p, PathUse::Existing).map(|r| r.split()).unwrap();
        assert_eq!(split("."), Split::Root);
        assert_eq!(split("./"), Split::Root);
        assert_eq!(split(".//./"), Split::Root);
        assert_eq!(split("a/"), Split::NotAName);
        assert_eq!(split("a/.."), Split::NotAName);
        assert_eq!(split("a/."), Split::NotAName);
        assert_eq!(
            split("x.txt"),
            Split::Named {
                parent: ".".into(),
                leaf: "x.txt"
            }
        );
        assert_eq!(
            split("./a//b/./c.txt"),
            Split::Named {
                parent: "a/b".into(),
                leaf: "c.txt"
            }
        );
        assert_eq!(
            split("a/../b"),
            Split::Named {
                parent: "a/..".into(),
                leaf: "b"
            }
        );
    }

    #[test]
    fn entry_allows_trailing_slashes_and_flags_dot_endings() {
        let entry = |p| check_path(p, PathUse::Existing).map(|r| r.entry()).unwrap();
        for root in [".", "./", ".//./", "./."] {
            assert_eq!(entry(root), Entry::Root, "{root}");
        }
        for dotted in ["..", "../", "a/..", "a/.", "a/./", "a/../", "./.."] {
            assert_eq!(entry(dotted), Entry::Dotted, "{dotted}");
        }
        assert_eq!(
            entry("sub//"),
            Entry::Named {
                parent: ".".into(),
                leaf: "sub",
                dir_only: true
            }
        );
        assert_eq!(
            entry("./a//b.txt"),
            Entry::Named {
                parent: "a".into(),
                leaf: "b.txt",
                dir_only: false
            }
        );
        assert_eq!(
            entry("a/../b/"),
            Entry::Named {
                parent: "a/..".into(),
                leaf: "b",
                dir_only: true
            }
        );
    }
}
