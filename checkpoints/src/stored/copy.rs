//! Content into and out of the log: [`stored`] (a shape as a record keeps it), [`Copy`] (a
//! walk's files copied into the log, fingerprinted on the way: [`Tee`]) and [`Part`] (a file's
//! bytes read back from the log).

use std::{
    fs::File,
    io::{self, Read},
    os::unix::fs::FileExt,
};

use rojos_fs_guard::{Shape, Visit};

use super::format::StoredNode;
use crate::fingerprint::Hasher;

/// `shape` as a record stores it: each file's offset counted from the record's content
/// start (`payload` so far), in the order a walk copies them (names in order, depth first).
pub(super) fn stored(shape: &Shape, payload: &mut u64) -> StoredNode {
    match shape {
        Shape::Absent => StoredNode::Absent,
        Shape::File { mode, size, .. } => {
            let at = *payload;
            *payload += size;
            StoredNode::File {
                mode: *mode,
                at,
                size: *size,
            }
        }
        Shape::Folder { mode, entries } => StoredNode::Folder {
            mode: *mode,
            entries: entries
                .iter()
                .map(|(name, entry)| (name.clone(), stored(entry, payload)))
                .collect(),
        },
        Shape::Symlink { target } => StoredNode::Symlink {
            target: target.clone(),
        },
    }
}

/// A recording's walk: each file's bytes copied into the log where its record puts them,
/// and fingerprinted, one part at a time.
pub(super) struct Copy<'a> {
    pub(super) file: &'a File,
    /// Where the walk's content starts in the log.
    pub(super) at: u64,
    pub(super) hasher: Hasher,
}

impl Visit for Copy<'_> {
    fn absent(&mut self) -> io::Result<()> {
        self.hasher.absent()
    }

    fn folder(&mut self, mode: u32, entries: usize) -> io::Result<()> {
        self.hasher.folder(mode, entries)
    }

    fn entry(&mut self, name: &str) -> io::Result<()> {
        self.hasher.entry(name)
    }

    fn symlink(&mut self, target: &str) -> io::Result<()> {
        self.hasher.symlink(target)
    }

    fn file(&mut self, mode: u32, size: u64, at: u64, content: &mut dyn Read) -> io::Result<()> {
        let mut to = self.at + at;
        let mut teed = Tee {
            content,
            file: self.file,
            to: &mut to,
        };
        self.hasher.file(mode, size, at, &mut teed)
    }
}

/// A file's content on its way into the hasher, written to the log as it passes.
struct Tee<'a, 'b> {
    content: &'a mut dyn Read,
    file: &'b File,
    to: &'a mut u64,
}

impl Read for Tee<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.content.read(buf)?;
        self.file.write_all_at(&buf[..n], *self.to)?;
        *self.to += n as u64;
        Ok(n)
    }
}

/// `left` bytes of the log from `at`, read in parts.
pub(super) struct Part<'a> {
    pub(super) file: &'a File,
    pub(super) at: u64,
    pub(super) left: u64,
}

impl Read for Part<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.at += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}
