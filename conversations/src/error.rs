//! `StoreError`, the one error type of the conversation store.
//! Variants say what the caller can do (bad input, unknown conversation, a
//! database to upgrade or repair, a database server to wait for); the backend's own
//! error stays in the source chain.

use std::error::Error;
use std::path::PathBuf;

use crate::id::ConversationId;

/// A boxed error from the backend (SQLite today), kept as the `source`.
pub(crate) type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why a conversation store call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A conversation id from outside input does not have the accepted shape.
    #[error(
        "invalid conversation id '{}': expected 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'",
        id.escape_debug()
    )]
    InvalidId {
        /// The rejected input, cut to 80 characters (escaped when displayed, so
        /// control characters cannot forge log lines).
        id: String,
    },

    /// No conversation has this id.
    #[error("conversation '{id}' not found")]
    NotFound {
        /// The id that was looked up.
        id: ConversationId,
    },

    /// A message handed to `append` is not an OpenAI-format message; nothing of
    /// that step was stored.
    #[error("message {index} of the appended step {reason}")]
    InvalidMessage {
        /// Position of the message within the step, from 0.
        index: usize,
        /// What is wrong with it, e.g. `is not a JSON object`.
        reason: &'static str,
    },

    /// A title given to `rename` is not acceptable; nothing was changed.
    #[error("invalid title: {reason}")]
    InvalidTitle {
        /// What is wrong and what to do, e.g. `it is longer than 80 characters (93); shorten it`.
        reason: String,
    },

    /// `replace_from` was asked to replace from a message index the conversation does not
    /// reach; nothing was changed.
    #[error("conversation '{id}' has {count} messages: it cannot be replaced from message {from}")]
    ReplacePastEnd {
        /// The conversation.
        id: ConversationId,
        /// The index asked for.
        from: u64,
        /// How many messages it holds.
        count: u64,
    },

    /// The database was written by a newer Rojos; this build must not touch it.
    #[error(
        "conversation database '{path}' has schema version {found}, newer than version {supported} that this build knows"
    )]
    SchemaTooNew {
        /// The database file.
        path: PathBuf,
        /// The version recorded in the file.
        found: i64,
        /// The newest version this build can migrate to.
        supported: i64,
    },

    /// The PostgreSQL database was migrated by a newer Rojos; this build must not touch it.
    #[error(
        "conversation database {database} has schema version {found}, newer than version {supported} that this build knows"
    )]
    DatabaseSchemaTooNew {
        /// The database, as `postgres://user@host:port/database`.
        database: String,
        /// The version recorded in the database.
        found: i64,
        /// The newest version this build can migrate to.
        supported: i64,
    },

    /// The database server cannot be reached now (down, restarting, or cut off); the same
    /// call may work once it is back.
    #[error("conversation store could not {action}: the database is unreachable")]
    Unavailable {
        /// What was being done, e.g. `append to conversation 'abc'`.
        action: String,
        /// The connection failure.
        #[source]
        source: BoxError,
    },

    /// A search ran out of its time (`[store] search_timeout_secs`) and was stopped: its text
    /// matches too much of what is stored, or the searches of others kept it waiting.
    #[error(
        "the search was stopped after {} s, its time limit; search for a longer, more specific text, or try again in a moment",
        limit.as_secs_f64()
    )]
    SearchTimedOut {
        /// The time limit.
        limit: std::time::Duration,
    },

    /// A stored row cannot be read back (bad JSON, impossible timestamp).
    #[error("conversation database holds a corrupt row: {what}")]
    Corrupt {
        /// Which row and field, e.g. `conversation 'abc' message 3 is not valid JSON`.
        what: String,
        /// The parse failure.
        #[source]
        source: BoxError,
    },

    /// The backend failed to carry out an operation (I/O, lock timeout, a
    /// database constraint, a worker that panicked).
    #[error("conversation store could not {action}")]
    Backend {
        /// What was being done, e.g. `append to conversation 'abc'`.
        action: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
}

impl StoreError {
    /// Wraps a backend failure, naming the action that failed.
    pub(crate) fn backend(action: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            action: action.into(),
            source: source.into(),
        }
    }

    /// Wraps a failure to reach the database, naming the action that failed.
    pub(crate) fn unavailable(action: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            action: action.into(),
            source: source.into(),
        }
    }

    /// Wraps an unreadable stored value, naming the row and field.
    pub(crate) fn corrupt(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Corrupt {
            what: what.into(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_can_cross_tasks_and_threads() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<StoreError>();
    }

    #[test]
    fn backend_errors_name_the_action_and_keep_the_cause_as_source() {
        let err = StoreError::backend("read conversation 'abc'", "disk I/O error");
        assert_eq!(
            err.to_string(),
            "conversation store could not read conversation 'abc'"
        );
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk I/O error"));
    }
}
