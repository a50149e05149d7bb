//! The checkpoints of a project's `checkpoints` folder, as a listing and the budget see
//! them: each run's head, or its log read when the head is missing or stale.

use std::io;

use cap_std::fs::Dir;

use super::head::{self, Head};
use super::stored::{log_parts, Manifest};

/// The checkpoints in a project's `checkpoints` folder (of one `conversation`, or all),
/// oldest first, from their heads (a log is read only when its head is missing or stale;
/// one that cannot be read is listed as unreadable). Record lines are at most `max_line`.
pub(super) fn scan(
    checkpoints: &Dir,
    conversation: Option<&str>,
    max_line: u64,
) -> io::Result<Vec<Head>> {
    let mut runs = Vec::new();
    for entry in checkpoints.entries()? {
        let entry = entry?;
        let Some(file) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some((of, run)) = log_parts(&file) else {
            continue;
        };
        if conversation.is_some_and(|c| c != of) {
            continue;
        }
        let size = match entry.metadata() {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut head = match head::read(checkpoints, of, run, size) {
            Some((head, head_len)) => Head {
                conversation: of.to_owned(),
                disk: size + head_len,
                ..head
            },
            None => match Manifest::read(checkpoints, &file, max_line) {
                Ok(Some(manifest)) => Head {
                    disk: size + head::len(checkpoints, of, run),
                    ..manifest.head()
                },
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(error = %e, checkpoint = %file, "unreadable checkpoint");
                    Head::unreadable(of, run, e.to_string())
                }
            },
        };
        if head.disk == 0 {
            head.disk = size;
        }
        if head.unreadable.is_none() && head.longest > max_line {
            head.unreadable = Some(format!(
                "a record of {} bytes is longer than {max_line} bytes ([limits] \
                 checkpoint_record_bytes): raise it to read this checkpoint",
                head.longest
            ));
        }
        runs.push(head);
    }
    runs.sort_by(|a, b| (a.created_at, &a.run).cmp(&(b.created_at, &b.run)));
    Ok(runs)
}
