//! Reading a [`ConversationId`] from outside input: the rule (`^[A-Za-z0-9_-]{1,64}$`) and
//! the [`StoreError::InvalidId`] a rejected input gets. Apart from `id`, so the id type stays
//! below the error type that names it.

use std::str::FromStr;

use crate::error::StoreError;
use crate::id::ConversationId;

/// How much of a rejected input an [`StoreError::InvalidId`] repeats.
const ECHO_MAX_CHARS: usize = 80;

impl ConversationId {
    /// Validates `input` as a conversation id.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidId`] when `input` is empty, longer than
    /// [`Self::MAX_LEN`], or has a character outside `A-Z a-z 0-9 _ -`.
    pub fn parse(input: &str) -> Result<Self, StoreError> {
        if is_valid(input) {
            Ok(Self::from_checked(input.to_owned()))
        } else {
            Err(StoreError::InvalidId {
                id: input.chars().take(ECHO_MAX_CHARS).collect(),
            })
        }
    }
}

fn is_valid(input: &str) -> bool {
    (1..=ConversationId::MAX_LEN).contains(&input.len())
        && input
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl FromStr for ConversationId {
    type Err = StoreError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::parse(input)
    }
}

impl TryFrom<String> for ConversationId {
    type Error = StoreError;

    fn try_from(input: String) -> Result<Self, Self::Error> {
        if is_valid(&input) {
            Ok(Self::from_checked(input))
        } else {
            Self::parse(&input)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_allowed_characters_up_to_64_long_are_accepted() {
        for ok in ["a", "abc", "A-b_9", "---", &"x".repeat(64)] {
            assert_eq!(ConversationId::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn empty_overlong_and_unsafe_ids_are_rejected() {
        let long = "x".repeat(65);
        for bad in [
            "", &long, "a/b", "..", "a b", "é", "%2e", "a.b", "a\0b", "id\n", "../etc",
        ] {
            assert!(
                matches!(
                    ConversationId::parse(bad),
                    Err(StoreError::InvalidId { .. })
                ),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn rejection_message_names_the_input_and_the_rule() {
        let err = ConversationId::parse("a/b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid conversation id 'a/b': expected 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"
        );
    }

    #[test]
    fn rejection_message_escapes_control_characters_of_the_input() {
        let err = ConversationId::parse("a\nINFO forged").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("invalid conversation id 'a\\nINFO forged'"));
    }

    #[test]
    fn rejection_message_repeats_at_most_80_characters_of_the_input() {
        let err = ConversationId::parse(&"y".repeat(10_000)).unwrap_err();
        let StoreError::InvalidId { id } = err else {
            panic!("expected InvalidId");
        };
        assert_eq!(id.len(), 80);
    }
}
