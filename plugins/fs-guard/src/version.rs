//! A file's content version, for stale-write protection (docs/tools.md, "Stale writes"):
//! the first 64 bits of the SHA-256 of its bytes, written as 16 lowercase hex digits.
//! `get_text_content` returns it on request and `write_text_content` compares it with the
//! file's current content just before replacing it ([`crate::IfExists::ReplaceIfVersion`]).
//! 64 bits make an accidental match between two different contents practically impossible;
//! the version guards against lost updates, not against a caller who wants to overwrite (it
//! can simply leave the version out).

use std::fmt;
use std::io::Read;

use sha2::{Digest, Sha256};

/// How many bytes of the SHA-256 a version keeps.
const VERSION_BYTES: usize = 8;

/// The version of one file content.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentVersion([u8; VERSION_BYTES]);

impl ContentVersion {
    /// The version of `bytes`.
    pub fn of(bytes: &[u8]) -> ContentVersion {
        ContentVersion::from_digest(Sha256::digest(bytes).as_slice())
    }

    /// The version of everything `reader` yields.
    ///
    /// # Errors
    ///
    /// The reader's I/O error.
    pub fn of_reader(mut reader: impl Read) -> std::io::Result<ContentVersion> {
        let mut hasher = Sha256::new();
        let mut buffer = [0u8; 64 * 1024];
        loop {
            match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ContentVersion::from_digest(hasher.finalize().as_slice()))
    }

    fn from_digest(digest: &[u8]) -> ContentVersion {
        let mut version = [0u8; VERSION_BYTES];
        version.copy_from_slice(&digest[..VERSION_BYTES]);
        ContentVersion(version)
    }

    /// Reads a version as [`fmt::Display`] writes it (upper-case digits are accepted).
    ///
    /// # Errors
    ///
    /// Anything but 16 hex digits, with a message the model can act on.
    pub fn parse(text: &str) -> Result<ContentVersion, BadVersion> {
        let text = text.trim();
        if text.len() != VERSION_BYTES * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadVersion);
        }
        let mut version = [0u8; VERSION_BYTES];
        for (byte, pair) in version.iter_mut().zip(text.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| BadVersion)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| BadVersion)?;
        }
        Ok(ContentVersion(version))
    }
}

impl fmt::Display for ContentVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ContentVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentVersion({self})")
    }
}

/// A string that is not a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected_version must be the 16 hex digits get_text_content returned as \"version\" \
     (called with \"with_version\": true), like \"2cf24dba5fb0a30e\""
)]
pub struct BadVersion;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_the_first_64_bits_of_the_sha256_in_hex() {
        // sha256("hello") = 2cf24dba5fb0a30e26e83b2ac5b9e29e…
        assert_eq!(ContentVersion::of(b"hello").to_string(), "2cf24dba5fb0a30e");
        assert_eq!(ContentVersion::of(b"").to_string(), "e3b0c44298fc1c14");
        assert_ne!(ContentVersion::of(b"hello"), ContentVersion::of(b"hello\n"));
    }

    #[test]
    fn the_reader_form_equals_the_slice_form_across_buffer_boundaries() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let read = ContentVersion::of_reader(big.as_slice()).unwrap();
        assert_eq!(read, ContentVersion::of(&big));
    }

    #[test]
    fn parse_reads_what_display_writes_and_refuses_anything_else() {
        let version = ContentVersion::of(b"text");
        assert_eq!(ContentVersion::parse(&version.to_string()), Ok(version));
        assert_eq!(
            ContentVersion::parse(&version.to_string().to_uppercase()),
            Ok(version)
        );
        for bad in [
            "",
            "2cf24dba5fb0a30",
            "2cf24dba5fb0a30e0",
            "2cf24dba5fb0a30g",
            "+cf24dba5fb0a30e",
            "2cf24dba5fb0a3é",
        ] {
            assert_eq!(ContentVersion::parse(bad), Err(BadVersion), "{bad:?}");
        }
    }
}
