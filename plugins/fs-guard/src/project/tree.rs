//! Recursive delete beneath an open folder handle, safe against a concurrent process that
//! swaps a folder for a symlink (the CVE-2022-21658 class of `remove_dir_all` bugs).
//!
//! The walk never resolves a path: every step is one name inside a folder handle the walk
//! holds. A folder is opened with `O_DIRECTORY | O_NOFOLLOW` (a symlink, even to a folder,
//! fails with `ELOOP`, and a FIFO or device fails with `ENOTDIR` before it is opened), then
//! emptied through that handle, so a swap after the open changes nothing: the handle still
//! names the folder that was inside. Anything that is not a folder is removed with
//! `unlinkat`, which removes a link itself and never opens anything. A name that changes
//! between the two attempts is retried a few times, then reported. Other file systems
//! mounted inside are not entered.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{from_io, PathError, Shown};

/// How a folder is opened by handle when walking a tree: read-only, a folder or nothing, never
/// through a symlink (`ELOOP`), never blocking, not inherited by children.
pub(super) const FOLDER_NOFOLLOW: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// How many folders deep a recursive delete goes (each level holds one open descriptor).
pub const MAX_DELETE_DEPTH: usize = 256;

/// How often one name is looked at again when it keeps changing type, and how many passes
/// a folder gets when entries keep appearing in it.
const MAX_ATTEMPTS: usize = 8;

/// One folder being emptied: its entries, read through its own handle, and its name in the
/// folder below it on the stack.
struct Frame {
    entries: rustix::fs::Dir,
    name: CString,
    dev: u64,
    passes: usize,
}

/// What became of one name.
enum Step {
    /// It is gone: removed.
    Removed,
    /// There was nothing (left) to remove.
    Missing,
    /// It is a folder on the same file system, open: empty it, then remove it.
    Folder(OwnedFd, u64),
}

/// Removes `leaf` of `parent`, with everything in it if it is a folder. `path` is the model's
/// path of `leaf`, for messages.
pub(super) fn remove(parent: &impl AsFd, leaf: &str, path: &str) -> Result<(), PathError> {
    let parent = parent.as_fd();
    let at = |names: &[&CStr]| describe(path, names);
    let io = |names: &[&CStr], e: Errno| from_io(&at(names), e.into());
    let leaf = CString::new(leaf).map_err(|_| PathError::Nul {
        path: Shown::new(path),
    })?;
    let parent_dev = rustix::fs::fstat(parent).map_err(|e| io(&[], e))?.st_dev;

    for attempt in 0..MAX_ATTEMPTS {
        let mut stack = match remove_name(parent, &leaf, parent_dev, true, path)? {
            Step::Removed => return Ok(()),
            // Gone on a later attempt: someone else removed what was left.
            Step::Missing if attempt > 0 => return Ok(()),
            Step::Missing => {
                return Err(PathError::NotFound {
                    path: Shown::new(path),
                })
            }
            Step::Folder(fd, dev) => {
                vec![Frame::new(fd, leaf.clone(), dev).map_err(|e| io(&[], e))?]
            }
        };
        while let Some(top) = stack.len().checked_sub(1) {
            match stack[top].entries.read() {
                Some(Ok(entry)) => {
                    let name = entry.file_name();
                    if name == c"." || name == c".." {
                        continue;
                    }
                    let likely_dir =
                        matches!(entry.file_type(), FileType::Directory | FileType::Unknown);
                    let mut at = names(&stack);
                    at.push(name);
                    let shown = describe(path, &at);
                    let fd = stack[top].entries.fd().map_err(|e| io(&at, e))?;
                    match remove_name(fd, name, stack[top].dev, likely_dir, &shown)? {
                        Step::Removed | Step::Missing => {}
                        Step::Folder(child, dev) => {
                            if stack.len() >= MAX_DELETE_DEPTH {
                                return Err(PathError::TooDeep {
                                    path: Shown::new(path),
                                    max: MAX_DELETE_DEPTH,
                                });
                            }
                            let frame = Frame::new(child, name.to_owned(), dev)
                                .map_err(|e| from_io(&shown, e.into()))?;
                            stack.push(frame);
                        }
                    }
                }
                Some(Err(e)) => return Err(io(&names(&stack), e)),
                None => {
                    let Some(mut frame) = stack.pop() else { break };
                    let (outer, at) = match stack.last() {
                        Some(below) => {
                            let mut at = names(&stack);
                            at.push(&frame.name);
                            (below.entries.fd().map_err(|e| io(&at, e))?, at)
                        }
                        None => (parent, Vec::new()),
                    };
                    match rustix::fs::unlinkat(outer, &frame.name, AtFlags::REMOVEDIR) {
                        Ok(()) if stack.is_empty() => return Ok(()),
                        Ok(()) => {}
                        // Entries appeared while it was emptied: read it again.
                        Err(Errno::NOTEMPTY) if frame.passes < MAX_ATTEMPTS => {
                            frame.passes += 1;
                            frame.entries.rewind();
                            stack.push(frame);
                        }
                        Err(Errno::NOTEMPTY) => {
                            return Err(PathError::Changed {
                                path: Shown::new(&describe(path, &at)),
                            })
                        }
                        // The folder was renamed away and its name now holds something else,
                        // or nothing. Below the top, the outer folder's next pass finds
                        // whatever is left; at the top, start again on the name.
                        Err(Errno::NOENT) if stack.is_empty() => return Ok(()),
                        Err(Errno::NOTDIR) if stack.is_empty() => break,
                        Err(Errno::NOENT | Errno::NOTDIR) => {}
                        Err(e) => return Err(io(&at, e)),
                    }
                }
            }
        }
    }
    Err(PathError::Changed {
        path: Shown::new(path),
    })
}

impl Frame {
    fn new(fd: OwnedFd, name: CString, dev: u64) -> Result<Self, Errno> {
        Ok(Frame {
            entries: rustix::fs::Dir::new(fd)?,
            name,
            dev,
            passes: 0,
        })
    }
}

/// Removes the name `name` of `folder` if it is not a folder (a link is removed as a link),
/// or opens it if it is one on the file system `dev`. `likely_dir` says which to try first;
/// a name that changes type between the two is looked at again.
fn remove_name(
    folder: BorrowedFd<'_>,
    name: &CStr,
    dev: u64,
    likely_dir: bool,
    path: &str,
) -> Result<Step, PathError> {
    let io = |e: Errno| from_io(path, e.into());
    let mut try_open = likely_dir;
    for _ in 0..MAX_ATTEMPTS {
        if try_open {
            match rustix::fs::openat(folder, name, FOLDER_NOFOLLOW, Mode::empty()) {
                Ok(fd) => {
                    let child_dev = rustix::fs::fstat(&fd).map_err(io)?.st_dev;
                    if child_dev != dev {
                        return Err(PathError::MountPoint {
                            path: Shown::new(path),
                        });
                    }
                    return Ok(Step::Folder(fd, child_dev));
                }
                // A symlink (ELOOP), or a file, FIFO, socket or device (ENOTDIR): unlink it.
                Err(Errno::LOOP | Errno::NOTDIR) => {}
                Err(Errno::NOENT) => return Ok(Step::Missing),
                Err(e) => return Err(io(e)),
            }
        }
        match rustix::fs::unlinkat(folder, name, AtFlags::empty()) {
            Ok(()) => return Ok(Step::Removed),
            Err(Errno::NOENT) => return Ok(Step::Missing),
            // A folder (now): open it.
            Err(Errno::ISDIR) => try_open = true,
            Err(e) => return Err(io(e)),
        }
    }
    Err(PathError::Changed {
        path: Shown::new(path),
    })
}

/// The names of the folders on the stack below the top one (the top one is the model's
/// path itself).
fn names(stack: &[Frame]) -> Vec<&CStr> {
    stack.iter().skip(1).map(|f| f.name.as_c_str()).collect()
}

/// The model's `path` followed by `names`, for a message.
fn describe(path: &str, names: &[&CStr]) -> String {
    let mut shown = path.to_owned();
    for name in names {
        shown.push('/');
        shown.push_str(&name.to_string_lossy());
    }
    shown
}
