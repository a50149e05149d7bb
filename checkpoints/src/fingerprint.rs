//! The fingerprint of what stands at a path: SHA-256 over its type, mode, bytes, link target
//! and, for a folder, every entry's name and fingerprint input in name order. Two states
//! with the same fingerprint are the same for undo (modification times are not part of it).
//! Undo's own hash: the stale-write protection hashes file content in fs-guard separately.
//! [`Hasher`] takes the same input as a walk ([`Visit`]) with files' bytes streamed, so a
//! tree is fingerprinted without holding its content.

use std::io::{self, Read};

#[cfg(test)]
use rojos_fs_guard::Node;
use rojos_fs_guard::Visit;
use sha2::{Digest, Sha256};

/// The bytes a file's content is read or copied in: all a recording, a fingerprint or an
/// undo holds of it at once.
pub(super) const CHUNK: usize = 64 << 10;

/// The fingerprint of `node`, as lowercase hex.
#[cfg(test)]
pub(super) fn fingerprint(node: &Node) -> String {
    let mut hasher = Sha256::new();
    feed(&mut hasher, node);
    hex::encode(hasher.finalize())
}

/// The fingerprint of nothing standing at a path.
pub(super) fn absent() -> String {
    let mut hasher = Hasher::default();
    hasher
        .absent()
        .map_or_else(|_| String::new(), |()| hasher.finish())
}

/// A fingerprint fed by a walk; files' bytes pass through in parts.
#[derive(Default)]
pub(super) struct Hasher {
    sha: Sha256,
    /// The part of a file read at a time (at most [`CHUNK`] bytes, kept between files).
    buffer: Vec<u8>,
}

impl Hasher {
    /// The fingerprint of what was fed, as lowercase hex.
    pub(super) fn finish(self) -> String {
        hex::encode(self.sha.finalize())
    }
}

impl Visit for Hasher {
    fn absent(&mut self) -> io::Result<()> {
        part(&mut self.sha, b'a', &[]);
        Ok(())
    }

    fn folder(&mut self, mode: u32, entries: usize) -> io::Result<()> {
        part(&mut self.sha, b'd', &mode.to_le_bytes());
        part(&mut self.sha, b'n', &(entries as u64).to_le_bytes());
        Ok(())
    }

    fn entry(&mut self, name: &str) -> io::Result<()> {
        part(&mut self.sha, b'e', name.as_bytes());
        Ok(())
    }

    fn symlink(&mut self, target: &str) -> io::Result<()> {
        part(&mut self.sha, b'l', target.as_bytes());
        Ok(())
    }

    fn file(&mut self, mode: u32, size: u64, _at: u64, content: &mut dyn Read) -> io::Result<()> {
        part(&mut self.sha, b'f', &mode.to_le_bytes());
        self.sha.update([b'c']);
        self.sha.update(size.to_le_bytes());
        let want = usize::try_from(size).unwrap_or(CHUNK).clamp(1, CHUNK);
        if self.buffer.len() < want {
            self.buffer.resize(want, 0);
        }
        loop {
            let n = content.read(&mut self.buffer)?;
            if n == 0 {
                return Ok(());
            }
            self.sha.update(&self.buffer[..n]);
        }
    }
}

/// One tagged, length-prefixed part: no two different trees feed the same bytes.
fn part(hasher: &mut Sha256, tag: u8, bytes: &[u8]) {
    hasher.update([tag]);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
fn feed(hasher: &mut Sha256, node: &Node) {
    let mut part = |tag: u8, bytes: &[u8]| part(hasher, tag, bytes);
    match node {
        Node::Absent => part(b'a', &[]),
        Node::File { mode, bytes } => {
            part(b'f', &mode.to_le_bytes());
            part(b'c', bytes);
        }
        Node::Symlink { target } => part(b'l', target.as_bytes()),
        Node::Folder { mode, entries } => {
            part(b'd', &mode.to_le_bytes());
            part(b'n', &(entries.len() as u64).to_le_bytes());
            for (name, entry) in entries {
                self::part(hasher, b'e', name.as_bytes());
                feed(hasher, entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn file(mode: u32, bytes: &[u8]) -> Node {
        Node::File {
            mode,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn content_mode_type_and_names_all_change_the_fingerprint() {
        let folder = |name: &str, node: Node| Node::Folder {
            mode: 0o755,
            entries: BTreeMap::from([(name.to_owned(), node)]),
        };
        let states = [
            Node::Absent,
            file(0o644, b"a"),
            file(0o600, b"a"),
            file(0o644, b"b"),
            Node::Symlink { target: "a".into() },
            folder("a", file(0o644, b"")),
            folder("b", file(0o644, b"")),
            folder("a", Node::Absent),
        ];
        let prints: std::collections::HashSet<String> = states.iter().map(fingerprint).collect();
        assert_eq!(prints.len(), states.len());
        assert_eq!(
            fingerprint(&file(0o644, b"a")),
            fingerprint(&file(0o644, b"a"))
        );
    }

    /// Feeds `node` to `hasher` as a walk would.
    fn walk(hasher: &mut Hasher, node: &Node) {
        match node {
            Node::Absent => hasher.absent().unwrap(),
            Node::File { mode, bytes } => hasher
                .file(*mode, bytes.len() as u64, 0, &mut bytes.as_slice())
                .unwrap(),
            Node::Symlink { target } => hasher.symlink(target).unwrap(),
            Node::Folder { mode, entries } => {
                hasher.folder(*mode, entries.len()).unwrap();
                for (name, entry) in entries {
                    hasher.entry(name).unwrap();
                    walk(hasher, entry);
                }
            }
        }
    }

    #[test]
    fn a_streamed_fingerprint_is_the_fingerprint_of_the_whole_tree() {
        let tree = Node::Folder {
            mode: 0o755,
            entries: BTreeMap::from([
                ("a".to_owned(), file(0o644, &vec![3u8; 200_000])),
                ("b".to_owned(), Node::Symlink { target: "a".into() }),
                (
                    "c".to_owned(),
                    Node::Folder {
                        mode: 0o700,
                        entries: BTreeMap::new(),
                    },
                ),
            ]),
        };
        for node in [tree, Node::Absent, file(0o600, b"")] {
            let mut hasher = Hasher::default();
            walk(&mut hasher, &node);
            assert_eq!(hasher.finish(), fingerprint(&node));
        }
        assert_eq!(absent(), fingerprint(&Node::Absent));
    }
}
