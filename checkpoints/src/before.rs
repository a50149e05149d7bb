//! The text a file held before a run, read from the run's checkpoint: what the panel's line
//! diff of a `write_text_content` call compares the written text with (docs/api.md,
//! `GET /conversations/{id}/checkpoints/{run}/before`). Only the checkpoint is read, never
//! the project, so a path here reaches nothing but the checkpoint's own records.

use std::io;

use super::stored::{Log, StoredNode};

/// What a path held before the run.
#[derive(Debug, PartialEq, Eq)]
pub enum Before {
    /// A text file.
    Text(String),
    /// Nothing: the run created it.
    Absent,
}

/// Why the earlier text cannot be given.
#[derive(Debug, thiserror::Error)]
pub enum BeforeError {
    /// The path is not one the checkpoint can name.
    #[error("{0}")]
    BadPath(String),
    /// No run of that id changed files in the conversation.
    #[error("no run {0} with file changes in this conversation")]
    NoRun(String),
    /// The run did not record that path.
    #[error("the run did not change {0:?}")]
    NotRecorded(String),
    /// The run's checkpoint cannot be read.
    #[error("the checkpoint of run {0} cannot be read ({1})")]
    Unreadable(String, String),
    /// The run's checkpoint was dropped.
    #[error("the checkpoint of run {0} was dropped to keep within limits.checkpoint_bytes")]
    Evicted(String),
    /// It was not a text file, or it is over the limit.
    #[error("{0}")]
    NotText(String),
    /// Over the size limit.
    #[error("the earlier file is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The checkpoint cannot be read.
    #[error("the checkpoint cannot be read")]
    Io(#[from] io::Error),
}

/// The parts of `path` (without empty and `.` parts), or why it cannot name a record.
pub(super) fn parts(path: &str) -> Result<Vec<&str>, BeforeError> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") || path.starts_with('/') {
        return Err(BeforeError::BadPath(format!(
            "path {path:?} names no file: give it relative to the project root, without '..', \
             as the tool call named it"
        )));
    }
    Ok(parts)
}

/// The earlier text of `path` in the run's `log` (the first record that holds it: the state
/// before the run), at most `limit` bytes.
pub(super) fn find(log: &Log, path: &str, limit: u64) -> Result<Before, BeforeError> {
    let wanted = parts(path)?;
    for entry in &log.manifest.entries {
        let recorded: Vec<&str> = entry.path.split('/').collect();
        let Some(rest) = wanted.strip_prefix(recorded.as_slice()) else {
            continue;
        };
        let mut node = &entry.before;
        for name in rest {
            node = match node {
                StoredNode::Folder { entries, .. } => match entries.get(*name) {
                    Some(child) => child,
                    None => return Ok(Before::Absent),
                },
                _ => return Ok(Before::Absent),
            };
        }
        return match node {
            StoredNode::Absent => Ok(Before::Absent),
            StoredNode::File { size, .. } if *size > limit => {
                Err(BeforeError::TooLarge { size: *size, limit })
            }
            StoredNode::File { .. } => match log.load(node)? {
                rojos_fs_guard::Node::File { bytes, .. } => text(bytes, path),
                _ => Err(BeforeError::NotText(format!("{path:?} was not a file"))),
            },
            StoredNode::Folder { .. } => Err(BeforeError::NotText(format!(
                "{path:?} was a folder before the run"
            ))),
            StoredNode::Symlink { .. } => Err(BeforeError::NotText(format!(
                "{path:?} was a symbolic link before the run"
            ))),
        };
    }
    Err(BeforeError::NotRecorded(path.to_owned()))
}

fn text(bytes: Vec<u8>, path: &str) -> Result<Before, BeforeError> {
    if bytes.contains(&0) {
        return Err(BeforeError::NotText(format!(
            "{path:?} was not text before the run"
        )));
    }
    String::from_utf8(bytes)
        .map(Before::Text)
        .map_err(|_| BeforeError::NotText(format!("{path:?} was not UTF-8 text before the run")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_absolute_and_empty_paths_name_no_record() {
        for path in ["../x", "a/../b", "/etc/passwd", "", "./"] {
            assert!(
                matches!(parts(path), Err(BeforeError::BadPath(_))),
                "{path}"
            );
        }
        assert_eq!(parts("./a//b").expect("fine"), ["a", "b"]);
    }
}
