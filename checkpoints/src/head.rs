//! A checkpoint's head: `<conversationId>.<run>.head` beside the run's log, the few fields a
//! listing shows and the budget needs (docs/api.md "Undo of file changes"), so neither reads
//! the records. Rewritten after every record (not synced). A head counts only while it names
//! the log's current length: after a crash between the two, or for a log written without
//! one, the log itself is read. A log that cannot be read is listed as unreadable, never
//! left out (an undo would otherwise take an earlier run for the last one).

use std::io::{self, Read};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

/// The ending of a head's file name.
const HEAD: &str = ".head";
/// The longest head read (a head holds the paths a run's calls named).
const MAX_HEAD: u64 = 16 << 20;

/// What a listing knows of one run's checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Head {
    /// The length of the log this head describes.
    pub(super) log_len: u64,
    /// The run's id.
    pub(super) run: String,
    /// The index of the run's user message.
    pub(super) message: u64,
    /// When its first change was recorded, in Unix milliseconds.
    pub(super) created_at: u64,
    /// The paths its calls named.
    pub(super) paths: Vec<String>,
    /// Whether it was undone.
    pub(super) undone: bool,
    /// Whether the budget dropped its content.
    pub(super) evicted: bool,
    /// Whether it changed anything.
    pub(super) changed: bool,
    /// Its longest record line: a host whose `[limits] checkpoint_record_bytes` is lower
    /// cannot read it, and lists it so without reading it.
    #[serde(default)]
    pub(super) longest: u64,
    /// The conversation's id.
    #[serde(skip)]
    pub(super) conversation: String,
    /// Why its log cannot be read (it is then neither listed as available nor undone).
    #[serde(skip)]
    pub(super) unreadable: Option<String>,
    /// The bytes its log and head take on disk.
    #[serde(skip)]
    pub(super) disk: u64,
}

impl Head {
    /// The head of a log that cannot be read: what its name tells (`<created ms>-<message>`).
    pub(super) fn unreadable(conversation: &str, run: &str, why: String) -> Head {
        let (created, message) = run.split_once('-').unwrap_or((run, ""));
        Head {
            run: run.to_owned(),
            message: message.parse().unwrap_or(0),
            created_at: created.parse().unwrap_or(0),
            changed: true,
            conversation: conversation.to_owned(),
            unreadable: Some(why),
            ..Head::default()
        }
    }
}

/// The file name of the head of `run` in `conversation`.
pub(super) fn name(conversation: &str, run: &str) -> String {
    format!("{conversation}.{run}{HEAD}")
}

/// Writes `head` beside its log; returns its length.
pub(super) fn write(folder: &Dir, head: &Head) -> io::Result<u64> {
    let bytes = serde_json::to_vec(head).map_err(io::Error::other)?;
    folder.write(name(&head.conversation, &head.run), &bytes)?;
    Ok(bytes.len() as u64)
}

/// The length of the head of `run` (0 when it has none).
pub(super) fn len(folder: &Dir, conversation: &str, run: &str) -> u64 {
    folder
        .metadata(name(conversation, run))
        .map_or(0, |m| m.len())
}

/// The head of `run` when it describes a log of `log_len` bytes.
pub(super) fn read(
    folder: &Dir,
    conversation: &str,
    run: &str,
    log_len: u64,
) -> Option<(Head, u64)> {
    let file = folder.open(name(conversation, run)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_HEAD).read_to_end(&mut bytes).ok()?;
    let head: Head = serde_json::from_slice(&bytes).ok()?;
    (head.log_len == log_len && head.run == run).then_some((head, bytes.len() as u64))
}

/// The bytes a project's checkpoints take on disk: every file in its `checkpoints` folder
/// (logs, heads, and a dropped log's rewrite in progress), by its size, none of them read.
pub(super) fn disk_bytes(checkpoints: &Dir) -> io::Result<u64> {
    let mut total = 0u64;
    for entry in checkpoints.entries()? {
        match entry?.metadata() {
            Ok(meta) => total = total.saturating_add(meta.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}
