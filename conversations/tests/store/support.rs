//! Helpers shared by the store tests: a store in a fresh temp dir, a raw SQLite
//! connection to the same file, and message builders.

use std::path::{Path, PathBuf};

use rojos_conversations::SqliteStore;
use serde_json::{json, Value};
use tempfile::TempDir;

/// A store on `<tempdir>/storage/rojos.db`; keep the `TempDir` alive as long as
/// the store.
pub(crate) fn open_temp() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(db_path(&dir)).unwrap();
    (dir, store)
}

/// Where `open_temp` puts the database.
pub(crate) fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("storage").join("rojos.db")
}

/// A plain connection to the database file, bypassing the store.
pub(crate) fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// A user message.
pub(crate) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// A final assistant message.
pub(crate) fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// The full error chain, `{:#}`-style, for pinning messages.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
