//! `ProjectId`: a validated project id, the only form in which a request's `projectId`
//! reaches the file system.

use std::fmt;

/// A project id matching `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`: a plain folder name, nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProjectId(String);

/// Why a project id was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid projectId {0:?}: use 1 to 64 letters, digits, '_' or '-', starting with a letter or digit")]
pub struct ProjectIdError(String);

impl ProjectId {
    /// Validates `id`.
    ///
    /// # Errors
    ///
    /// [`ProjectIdError`] when `id` is not of the allowed shape.
    pub fn parse(id: &str) -> Result<ProjectId, ProjectIdError> {
        let bytes = id.as_bytes();
        let ok = matches!(bytes.first(), Some(b) if b.is_ascii_alphanumeric())
            && bytes.len() <= 64
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
        if ok {
            Ok(ProjectId(id.to_owned()))
        } else {
            let shown: String = id.chars().take(80).collect();
            Err(ProjectIdError(shown))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_accepted() {
        for id in ["demo", "a", "Proj_1-x", &"a".repeat(64)] {
            assert_eq!(ProjectId::parse(id).unwrap().as_str(), id);
        }
    }

    #[test]
    fn anything_path_like_is_refused() {
        let long = "a".repeat(65);
        let cases = [
            "", ".", "..", "a/../..", "/etc", "demo/", " demo", "-demo", "_demo", "a\\b", "%2e%2e",
            "a\0b", "dеmo", /* Cyrillic e */ "a.b", &long,
        ];
        for id in cases {
            assert!(ProjectId::parse(id).is_err(), "{id:?} should be refused");
        }
    }
}
