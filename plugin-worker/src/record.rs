//! Quarantine records: a quarantine outlives the server that decided it. One small JSON file
//! per library content, `<records>/<digest>.json` (the digest is the name of the server's
//! private copy of the library, its SHA-256), written atomically (a temporary file renamed
//! onto the name). A new server, and `rojos check`, find the library quarantined; a file
//! replaced by a different build has another digest and so no record. Deleting the record
//! lifts the quarantine at the next start (docs/plugins.md, "Quarantine").

use std::{
    io::{self, Write},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineRecord {
    /// The tool the library provides.
    pub tool: String,
    /// Why it is quarantined.
    pub reason: String,
}

/// The record file of `library` (the server's copy, named by its digest) under `records`.
pub fn record_path(records: &Path, library: &Path) -> Option<PathBuf> {
    let digest = library.file_stem()?.to_str()?;
    Some(records.join(format!("{digest}.json")))
}

/// The record of `library` under `records`, if there is a readable one.
pub fn read(records: &Path, library: &Path) -> Option<QuarantineRecord> {
    let path = record_path(records, library)?;
    let text = std::fs::read(&path).ok()?;
    match serde_json::from_slice(&text) {
        Ok(record) => Some(record),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "a quarantine record cannot be read; ignored");
            None
        }
    }
}

/// Writes `record` for `library` under `records` (made if missing), atomically.
///
/// # Errors
///
/// The folder or the file cannot be written.
pub fn write(records: &Path, library: &Path, record: &QuarantineRecord) -> io::Result<()> {
    let path = record_path(records, library)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "library has no digest name"))?;
    std::fs::create_dir_all(records)?;
    let mut temp = tempfile::NamedTempFile::new_in(records)?;
    temp.write_all(&serde_json::to_vec(record).map_err(io::Error::other)?)?;
    temp.as_file().sync_all()?;
    temp.persist(&path).map_err(|e| e.error)?;
    std::fs::File::open(records)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_back_by_its_librarys_digest_only() {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("quarantine");
        let library = Path::new("/copies/ab12.so");
        assert_eq!(read(&records, library), None);
        let record = QuarantineRecord {
            tool: "x".into(),
            reason: "its worker died".into(),
        };
        write(&records, library, &record).unwrap();
        assert_eq!(read(&records, library), Some(record));
        assert_eq!(read(&records, Path::new("/copies/cd34.so")), None);
        let names: Vec<_> = std::fs::read_dir(&records).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
    }
}
