//! Dropping a run's content when the budget needs room ([`evict`]: the log rewritten with
//! only the paths it named) and removing a dropped run's files ([`remove`]).

use std::io::{self, Write};

use cap_std::fs::Dir;

use super::{
    dir::sync_dir,
    format::{log_name, Manifest, Record, VERSION},
};
use crate::head::Head;

/// Drops the content of the run `head` describes in the project's `checkpoints` folder (it
/// stays listed, as no longer available): the log is replaced by one with neither content
/// nor entries, only the paths the run named and whether it changed anything (all its head
/// holds), atomically, and its head is written again. Returns the bytes the log and its
/// head take then.
pub(crate) fn evict(checkpoints: &Dir, head: &Head) -> io::Result<u64> {
    let mut manifest = Manifest::new(
        &head.conversation,
        head.run.clone(),
        head.message,
        head.created_at,
    );
    manifest.paths = head.paths.clone();
    manifest.undone = head.undone;
    manifest.evicted = true;
    manifest.changed = head.changed;
    let name = manifest.file_name();
    let temp = format!("{name}.tmp");
    let mut file = checkpoints.create(&temp)?;
    let records = [
        Record::Run {
            version: VERSION,
            run: manifest.run.clone(),
            message: manifest.message,
            created_at: manifest.created_at,
            evicted: true,
            changed: manifest.changed,
        },
        Record::Call {
            paths: manifest.paths.clone(),
            entries: Vec::new(),
            payload: 0,
        },
    ];
    for record in records
        .iter()
        .chain(manifest.undone.then_some(&Record::Undone))
    {
        let line = record.line()?;
        file.write_all(&line)?;
        manifest.len += line.len() as u64;
    }
    file.sync_all()?;
    checkpoints.rename(&temp, checkpoints, &name)?;
    sync_dir(checkpoints)?;
    let head = crate::head::write(checkpoints, &manifest.head()).unwrap_or(0);
    Ok(manifest.len + head)
}

/// Removes the log of `run` of `conversation` and its head (a dropped run the budget now
/// drops from the listing too).
pub(crate) fn remove(checkpoints: &Dir, conversation: &str, run: &str) -> io::Result<()> {
    for name in [
        log_name(conversation, run),
        crate::head::name(conversation, run),
    ] {
        match checkpoints.remove_file(&name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
