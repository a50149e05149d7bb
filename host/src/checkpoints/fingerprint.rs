//! The fingerprint of what stands at a path: SHA-256 over its type, mode, bytes, link target
//! and, for a folder, every entry's name and fingerprint input in name order. Two states
//! with the same fingerprint are the same for undo (modification times are not part of it).
//! Undo's own hash: the stale-write protection hashes file content in fs-guard separately.

use rojos_fs_guard::Node;
use sha2::{Digest, Sha256};

use crate::hex::hex;

/// The fingerprint of `node`, as lowercase hex.
pub(super) fn fingerprint(node: &Node) -> String {
    let mut hasher = Sha256::new();
    feed(&mut hasher, node);
    hex(&hasher.finalize())
}

/// One tagged, length-prefixed part: no two different trees feed the same bytes.
fn part(hasher: &mut Sha256, tag: u8, bytes: &[u8]) {
    hasher.update([tag]);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

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
}
