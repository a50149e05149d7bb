//! `ConversationId`: the validated id of a stored conversation.
//! Ids from outside input are checked against `^[A-Za-z0-9_-]{1,64}$`. New ids are 22 base62
//! characters: the creation time in milliseconds (8 characters), then 14 random ones (about
//! 83 bits from the thread-local CSPRNG: no one guesses an id). Time first, because every
//! store keys a conversation's rows by its id: ids made one after another sort together, so
//! the writes of conversations active at the same time share the B-trees' last pages instead
//! of each dirtying a page at a random place (docs/api.md, "Conversation ids").

use std::fmt;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// The base62 digits in ASCII order, so ids compare as their numbers do.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// How many characters of a new id are its creation time: 62^8 ms is about 6,900 years.
const TIME_LEN: usize = 8;
/// How many characters of a new id are random.
const RANDOM_LEN: usize = 14;

/// The id of a conversation: 1 to 64 characters from `A-Z a-z 0-9 _ -`, so it is
/// safe in URLs, file names and logs.
///
/// Parse outside input with `ConversationId::parse` (in `parse_id`) (or `FromStr`, or serde,
/// which validates too); [`ConversationId::generate`] makes a new random one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct ConversationId(String);

impl ConversationId {
    /// The longest accepted id, in characters.
    pub const MAX_LEN: usize = 64;

    /// Makes a new id: 22 base62 characters, the current time in milliseconds, then 14
    /// random characters.
    pub fn generate() -> Self {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        Self::generate_at(millis)
    }

    fn generate_at(millis: u128) -> Self {
        let mut id = [0u8; TIME_LEN + RANDOM_LEN];
        let (time, random) = id.split_at_mut(TIME_LEN);
        let mut rest = millis;
        for digit in time.iter_mut().rev() {
            *digit = BASE62[(rest % 62) as usize];
            rest /= 62;
        }
        let mut rng = rand::rng();
        for digit in random {
            *digit = BASE62[rng.random_range(0..62)];
        }
        Self(id.iter().map(|&b| char::from(b)).collect())
    }

    /// Wraps `id`, which the caller has checked (`parse_id`).
    pub(crate) fn from_checked(id: String) -> Self {
        Self(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ConversationId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<ConversationId> for String {
    fn from(id: ConversationId) -> Self {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_22_base62_characters_and_differ() {
        let a = ConversationId::generate();
        let b = ConversationId::generate();
        assert_eq!(a.as_str().len(), 22);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
        assert_eq!(ConversationId::parse(a.as_str()).unwrap(), a);
    }

    #[test]
    fn generated_ids_sort_by_their_creation_time() {
        let now = 1_764_672_000_000; // 2025-12-02
        let ids: Vec<ConversationId> = [
            0,
            1,
            61,
            62,
            now,
            now + 1,
            now + 3_600_000,
            62u128.pow(8) - 1,
        ]
        .into_iter()
        .map(ConversationId::generate_at)
        .collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
        assert_eq!(&ids[0].as_str()[..TIME_LEN], "00000000");
        assert_eq!(&ids[3].as_str()[..TIME_LEN], "00000010");
        // The same millisecond: the random part tells them apart.
        let twins = (
            ConversationId::generate_at(now),
            ConversationId::generate_at(now),
        );
        assert_eq!(twins.0.as_str()[..TIME_LEN], twins.1.as_str()[..TIME_LEN]);
        assert_ne!(twins.0, twins.1);
    }

    #[test]
    fn a_generated_id_starts_with_the_current_time() {
        let at = |millis| ConversationId::generate_at(millis).0[..TIME_LEN].to_owned();
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        };
        let before = at(now());
        let id = ConversationId::generate();
        let after = at(now());
        assert!(before.as_str() <= &id.as_str()[..TIME_LEN]);
        assert!(&id.as_str()[..TIME_LEN] <= after.as_str());
    }

    #[test]
    fn serde_reads_valid_ids_and_rejects_invalid_ones() {
        let id: ConversationId = serde_json::from_str("\"abc_1\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"abc_1\"");
        let err = serde_json::from_str::<ConversationId>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("invalid conversation id '../x'"));
    }
}
