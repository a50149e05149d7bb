//! `PathError`: every way a confined file operation fails, with the message the model reads.
//!
//! Messages name only the model's own relative path (quoted, control characters escaped,
//! long paths shortened), never the storage folder or a link's outside target. [`from_io`]
//! is the one mapping from `io::Error`/errno to these variants.

use std::fmt;
use std::io;

use rojos_plugin_api::{ErrorKind, ToolError};
use rustix::io::Errno;

use crate::limits::{MAX_NAME_BYTES, MAX_PATH_BYTES};

/// The model's path as shown in a message: quoted, with invisible characters escaped as
/// [`crate::names::escaped`] does and anything past 200 bytes cut, so an error can never be
/// used to smuggle formatting.
#[derive(Clone, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    /// Shows `path`, the model's own string.
    pub fn new(path: &str) -> Self {
        Shown(path.to_owned())
    }
}

impl fmt::Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN_BYTES: usize = 200;
        f.write_str("'")?;
        for (at, c) in self.0.char_indices() {
            if at >= SHOWN_BYTES {
                write!(f, "…' ({} bytes)", self.0.len())?;
                return Ok(());
            }
            if crate::names::is_invisible(c) {
                write!(f, "\\u{{{:04x}}}", c as u32)?;
            } else {
                write!(f, "{c}")?;
            }
        }
        f.write_str("'")
    }
}

/// A failed operation under the project root. Convert it into a [`ToolError`] with `?` or
/// `From`; [`PathError::kind`] gives the class.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path string is empty.
    #[error("path is empty: use '.' for the project root")]
    Empty,
    /// Absolute path, drive prefix, `..` above the root, or a symlink leading out.
    #[error("{path} leads outside the project: paths are relative to the project root")]
    Outside {
        /// The model's path.
        path: Shown,
    },
    /// The whole path is over [`MAX_PATH_BYTES`].
    #[error("path is {len} bytes long, over the limit of {MAX_PATH_BYTES} bytes")]
    PathTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// A component is over [`MAX_NAME_BYTES`], or the kernel said `ENAMETOOLONG`.
    #[error("{path}: name too long (at most {MAX_NAME_BYTES} bytes per name, {MAX_PATH_BYTES} per path)")]
    NameTooLong {
        /// The model's path.
        path: Shown,
    },
    /// The path contains a NUL character.
    #[error("{path} contains a NUL character, which no file name can hold")]
    Nul {
        /// The model's path.
        path: Shown,
    },
    /// The path contains a backslash.
    #[error("{path} contains a backslash: separate folders with '/' (a backslash is never a separator here)")]
    Backslash {
        /// The model's path.
        path: Shown,
    },
    /// A name the model creates holds an invisible character ([`crate::names::is_invisible`]).
    #[error("{path}: new names may not contain control, invisible or bidirectional formatting characters (found U+{code:04X}); choose a name without it")]
    ForbiddenChar {
        /// The model's path.
        path: Shown,
        /// The offending character's code point.
        code: u32,
    },
    /// Nothing has that name.
    #[error("{path} does not exist")]
    NotFound {
        /// The model's path.
        path: Shown,
    },
    /// A folder was needed and something else was found (the target or one of its parents).
    #[error("{path} is not a folder, or one of the folders on the way is a file")]
    NotADirectory {
        /// The model's path.
        path: Shown,
    },
    /// A file was needed and a folder was found.
    #[error("{path} is a folder, not a file")]
    IsADirectory {
        /// The model's path.
        path: Shown,
    },
    /// A write names a folder by its form (trailing `/`, `.` or `..`).
    #[error("{path} names a folder: give the name of a file")]
    NamesAFolder {
        /// The model's path.
        path: Shown,
    },
    /// A FIFO, socket, device or symlink where a file or folder was needed.
    #[error("{path} is {what}, not a regular file or folder")]
    Special {
        /// The model's path.
        path: Shown,
        /// What it is, with its article (`a FIFO (named pipe)`).
        what: &'static str,
    },
    /// A write names a symlink whose target is inside the project.
    #[error("{path} is a symbolic link to {target}: write to {target} instead")]
    SymlinkInside {
        /// The model's path.
        path: Shown,
        /// The link's target, relative to the project root.
        target: Shown,
    },
    /// A write or mkdir names a symlink that leads nowhere in the project.
    #[error("{path} is a symbolic link that does not lead to anything in the project: it is left as it is")]
    SymlinkElsewhere {
        /// The model's path.
        path: Shown,
    },
    /// The file is over the read limit.
    #[error("{path} is {size} bytes, over the read limit of {limit} bytes")]
    FileTooLarge {
        /// The model's path.
        path: Shown,
        /// The file's size.
        size: u64,
        /// `max_read_bytes`.
        limit: u64,
    },
    /// The file grew past the read limit while it was read.
    #[error("{path} grew past the read limit of {limit} bytes while it was read")]
    FileGrew {
        /// The model's path.
        path: Shown,
        /// `max_read_bytes`.
        limit: u64,
    },
    /// The text to write is over the write limit.
    #[error("text is {size} bytes, over the write limit of {limit} bytes")]
    TextTooLarge {
        /// The text's size in bytes.
        size: u64,
        /// `max_write_bytes`.
        limit: u64,
    },
    /// The file is not valid UTF-8.
    #[error("{path} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The model's path.
        path: Shown,
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// The file holds NUL bytes: binary, or UTF-16 text.
    #[error(
        "{path} contains a NUL byte at offset {offset}: it is binary (or UTF-16), not UTF-8 text"
    )]
    Binary {
        /// The model's path.
        path: Shown,
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// `ELOOP`.
    #[error("{path}: too many levels of symbolic links")]
    Loop {
        /// The model's path.
        path: Shown,
    },
    /// A file (or other non-folder) stands where a folder was to be created.
    #[error("{path} already exists and is not a folder")]
    ExistsNotAFolder {
        /// The model's path.
        path: Shown,
    },
    /// The destination of a move already exists.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The model's path.
        path: Shown,
    },
    /// A file stands at a path the host found missing when it let the call run without
    /// asking (`CallContext::create_only`): replacing it needs the user's approval.
    #[error(
        "{path} did not exist when this call was checked, so it was let run without asking \
         the user, but something created it since: nothing was written. Call again to be \
         asked before replacing it"
    )]
    Appeared {
        /// The model's path.
        path: Shown,
    },
    /// The destination of a move already exists (moves never replace anything).
    #[error("{path} already exists{}", destination_hint(.into_folder))]
    DestinationExists {
        /// The model's destination path.
        path: Shown,
        /// When the destination is a folder: the full path to give to move into it.
        into_folder: Option<Shown>,
    },
    /// The folder a move would put its entry in does not exist.
    #[error("{path}: the folder {folder} does not exist; create it first")]
    NoDestinationFolder {
        /// The model's destination path.
        path: Shown,
        /// The destination's folder, as the model wrote it.
        folder: Shown,
    },
    /// A folder would be moved into itself or one of its own subfolders.
    #[error("{from} cannot be moved into itself ({to})")]
    IntoItself {
        /// The model's source path.
        from: Shown,
        /// The model's destination path.
        to: Shown,
    },
    /// A move or delete path ends in `.` or `..`: it names no entry of a folder.
    #[error("{path} does not end in a name: give the path of the file or folder itself, without '.' or '..' at the end")]
    NotAnEntry {
        /// The model's path.
        path: Shown,
    },
    /// A recursive delete met a folder that another file system is mounted on.
    #[error("{path} is a mount point of another file system: it is left as it is")]
    MountPoint {
        /// The model's path (or the path of the entry under it).
        path: Shown,
    },
    /// A recursive delete met folders nested deeper than it goes.
    #[error("{path} holds folders nested more than {max} deep: delete the deepest ones first")]
    TooDeep {
        /// The model's path.
        path: Shown,
        /// How deep a recursive delete goes.
        max: usize,
    },
    /// Something else kept changing the folder while a recursive delete emptied it.
    #[error("{path} kept changing while it was deleted: part of it may be left, try again")]
    Changed {
        /// The model's path (or the path of the entry under it).
        path: Shown,
    },
    /// A folder to delete still has entries.
    #[error("{path} is a folder that is not empty")]
    NotEmpty {
        /// The model's path.
        path: Shown,
    },
    /// A write that expected a version of the file found other content, or no file.
    #[error("{path} was not written: {}", stale_reason(.expected, .current))]
    Stale {
        /// The model's path.
        path: Shown,
        /// The version the write expected.
        expected: crate::ContentVersion,
        /// What stands at the name now.
        current: Current,
    },
    /// The operation would act on the project root itself.
    #[error("the project root itself cannot be {action}")]
    Root {
        /// What was attempted, as a past participle (`deleted`, `moved`).
        action: &'static str,
    },
    /// A snapshot for undo met something it cannot record and put back.
    #[error("{path} holds {what}, which cannot be recorded for undo")]
    NotUndoable {
        /// The model's path (or the path of the entry under it).
        path: Shown,
        /// What it met.
        what: &'static str,
    },
    /// A snapshot for undo would hold more than its byte limit.
    #[error("{path}: its earlier content is over {limit} bytes, more than undo may record")]
    SnapshotTooLarge {
        /// The model's path (or the path of the entry under it).
        path: Shown,
        /// The limit.
        limit: u64,
    },
    /// `EACCES`, `EPERM`, `EROFS`.
    #[error("{path}: permission denied")]
    PermissionDenied {
        /// The model's path.
        path: Shown,
    },
    /// Any other I/O failure; the source is kept for logs, the message shows only the kind.
    #[error("{path}: {kind}")]
    Io {
        /// The model's path.
        path: Shown,
        /// The I/O error's kind, whose text carries no path.
        kind: io::ErrorKind,
        /// The original error.
        #[source]
        source: io::Error,
    },
}

impl PathError {
    /// The [`ErrorKind`] this failure has in a tool result.
    pub fn kind(&self) -> ErrorKind {
        use PathError::*;
        match self {
            Empty
            | PathTooLong { .. }
            | NameTooLong { .. }
            | Nul { .. }
            | Backslash { .. }
            | ForbiddenChar { .. } => ErrorKind::INVALID_ARGUMENTS,
            Outside { .. } => ErrorKind::OUTSIDE_ROOT,
            NotFound { .. } => ErrorKind::NOT_FOUND,
            FileTooLarge { .. }
            | FileGrew { .. }
            | TextTooLarge { .. }
            | SnapshotTooLarge { .. } => ErrorKind::TOO_LARGE,
            NotUtf8 { .. } | Binary { .. } => ErrorKind::NOT_TEXT,
            Stale { .. } => ErrorKind::STALE,
            Io { .. } => ErrorKind::IO,
            NotADirectory { .. }
            | IsADirectory { .. }
            | NamesAFolder { .. }
            | Special { .. }
            | SymlinkInside { .. }
            | SymlinkElsewhere { .. }
            | Loop { .. }
            | ExistsNotAFolder { .. }
            | AlreadyExists { .. }
            | Appeared { .. }
            | DestinationExists { .. }
            | NoDestinationFolder { .. }
            | IntoItself { .. }
            | NotAnEntry { .. }
            | MountPoint { .. }
            | TooDeep { .. }
            | Changed { .. }
            | NotEmpty { .. }
            | Root { .. }
            | NotUndoable { .. }
            | PermissionDenied { .. } => ErrorKind::REFUSED,
        }
    }
}

impl From<PathError> for ToolError {
    fn from(error: PathError) -> Self {
        ToolError::new(error.kind(), error.to_string())
    }
}

/// What a version-checked write found at its name ([`PathError::Stale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Current {
    /// A file with other content, of this version.
    Version(crate::ContentVersion),
    /// A file over the read limit: it cannot be the content that was read.
    OverReadLimit,
    /// No file any more (deleted or moved away).
    Gone,
}

/// The end of [`PathError::Stale`]'s message: what changed, and what to do.
fn stale_reason(expected: &crate::ContentVersion, current: &Current) -> String {
    let what = match current {
        Current::Version(now) => {
            format!("it changed since you read it (expected version {expected}, it is now {now})")
        }
        Current::OverReadLimit => format!(
            "it changed since you read it (expected version {expected}; it is now over the read limit)"
        ),
        Current::Gone => {
            return format!(
                "it no longer exists (it was deleted or moved since you read version {expected}); \
                 list its folder to see what is there, or write without expected_version to create it anew"
            )
        }
    };
    format!(
        "{what}; read it again with get_text_content (with_version: true) and make your change \
         to the current text"
    )
}

/// The end of [`PathError::DestinationExists`]'s message.
fn destination_hint(into_folder: &Option<Shown>) -> String {
    match into_folder {
        Some(full) => format!(
            " and is a folder; moving never replaces anything: to move into that folder, give \
             the full new path, such as {full}"
        ),
        None => {
            "; moving never replaces anything: delete it first or choose another name".to_owned()
        }
    }
}

/// Maps an I/O error from an operation on the model's `path` to a [`PathError`] that names
/// only that path. cap-std's sandbox refusals and `EXDEV` from `openat2` become
/// [`PathError::Outside`].
pub fn from_io(path: &str, error: io::Error) -> PathError {
    let path = Shown::new(path);
    if is_escape(&error) {
        return PathError::Outside { path };
    }
    if let Some(errno) = Errno::from_io_error(&error) {
        match errno {
            Errno::NOTDIR => return PathError::NotADirectory { path },
            Errno::ISDIR => return PathError::IsADirectory { path },
            Errno::LOOP => return PathError::Loop { path },
            Errno::NAMETOOLONG => return PathError::NameTooLong { path },
            Errno::XDEV => return PathError::Outside { path },
            // `ErrorKind` has its own variant for a read-only file system; to the model it
            // is a refusal like EACCES and EPERM (which the kinds below map).
            Errno::ROFS => return PathError::PermissionDenied { path },
            Errno::NOTEMPTY => return PathError::NotEmpty { path },
            _ => {}
        }
    }
    match error.kind() {
        io::ErrorKind::NotFound => PathError::NotFound { path },
        io::ErrorKind::PermissionDenied => PathError::PermissionDenied { path },
        io::ErrorKind::AlreadyExists => PathError::AlreadyExists { path },
        kind => PathError::Io {
            path,
            kind,
            source: error,
        },
    }
}

/// Whether cap-std refused the path as leading out of the sandbox (it reports that as a
/// `PermissionDenied` error without an errno).
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied
        && error.raw_os_error().is_none()
        && error.to_string().contains("outside of the filesystem")
}

/// What a non-regular, non-folder file type is, for [`PathError::Special`].
pub(crate) fn describe_type(file_type: &cap_std::fs::FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_dir() {
        "a folder"
    } else if file_type.is_file() {
        "a file"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_path_is_quoted_and_escapes_control_and_bidi_characters() {
        assert_eq!(
            Shown::new("a\nb\u{202e}c").to_string(),
            r"'a\u{000a}b\u{202e}c'"
        );
    }

    #[test]
    fn shown_path_debugs_as_it_displays_never_raw() {
        assert_eq!(format!("{:?}", Shown::new("a\nb")), r"'a\u{000a}b'");
    }

    #[test]
    fn only_cap_std_s_own_refusal_counts_as_an_escape() {
        let with_errno = io::Error::from_raw_os_error(libc_eacces());
        assert!(!is_escape(&with_errno));
        let other_kind = io::Error::other("a path led outside of the filesystem");
        assert!(!is_escape(&other_kind));
        let cap_std = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert!(is_escape(&cap_std));
    }

    fn libc_eacces() -> i32 {
        Errno::ACCESS.raw_os_error()
    }

    #[test]
    fn shown_path_is_cut_after_two_hundred_bytes_with_its_length() {
        let long = "a".repeat(5000);
        let shown = Shown::new(&long).to_string();
        assert!(shown.len() < 240, "{shown}");
        assert!(shown.ends_with("…' (5000 bytes)"), "{shown}");
    }

    #[test]
    fn cap_std_escape_error_maps_to_outside_root() {
        let escape = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        let error = from_io("../x", escape);
        assert!(matches!(error, PathError::Outside { .. }));
        assert_eq!(error.kind(), ErrorKind::OUTSIDE_ROOT);
        assert_eq!(
            error.to_string(),
            "'../x' leads outside the project: paths are relative to the project root"
        );
    }

    #[test]
    fn errnos_map_to_messages_naming_only_the_path() {
        let cases = [
            (Errno::NOENT, "'p' does not exist", ErrorKind::NOT_FOUND),
            (
                Errno::NOTDIR,
                "'p' is not a folder, or one of the folders on the way is a file",
                ErrorKind::REFUSED,
            ),
            (
                Errno::ISDIR,
                "'p' is a folder, not a file",
                ErrorKind::REFUSED,
            ),
            (
                Errno::LOOP,
                "'p': too many levels of symbolic links",
                ErrorKind::REFUSED,
            ),
            (
                Errno::XDEV,
                "'p' leads outside the project: paths are relative to the project root",
                ErrorKind::OUTSIDE_ROOT,
            ),
            (Errno::ACCESS, "'p': permission denied", ErrorKind::REFUSED),
            (Errno::PERM, "'p': permission denied", ErrorKind::REFUSED),
            (Errno::ROFS, "'p': permission denied", ErrorKind::REFUSED),
            (Errno::EXIST, "'p' already exists", ErrorKind::REFUSED),
            (
                Errno::NOTEMPTY,
                "'p' is a folder that is not empty",
                ErrorKind::REFUSED,
            ),
            (Errno::NOSPC, "'p': no storage space", ErrorKind::IO),
        ];
        for (errno, message, kind) in cases {
            let error = ToolError::from(from_io("p", io::Error::from(errno)));
            assert_eq!(error.message, message, "{errno:?}");
            assert_eq!(error.kind, kind, "{errno:?}");
        }
    }

    #[test]
    fn name_too_long_states_both_limits() {
        let error = from_io("p", io::Error::from(Errno::NAMETOOLONG));
        assert_eq!(
            error.to_string(),
            "'p': name too long (at most 255 bytes per name, 4096 per path)"
        );
        assert_eq!(error.kind(), ErrorKind::INVALID_ARGUMENTS);
    }
}
