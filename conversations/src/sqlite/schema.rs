//! The SQLite schema, its version (`PRAGMA user_version`) and the migrations that
//! bring any older file up to it, plus the settings every connection gets.
//! To evolve the schema, append a step to `MIGRATIONS`; never edit a shipped one.

use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::search;

/// Migration steps: `MIGRATIONS[n]` takes a database from version `n` to `n + 1`.
/// Version 0 is an empty (or brand-new) file.
const MIGRATIONS: &[&str] = &[
    // 1: conversations and their messages.
    //
    // Times are Unix milliseconds (UTC). `activity` orders a project's
    // conversations by last change even when two changes share a millisecond:
    // each create or append sets it above every other in the project.
    // `message_count` is also the `seq` of the next message; `step_count`
    // numbers `append` calls, and all messages of one call share its `step`.
    "CREATE TABLE conversations (
        id            TEXT PRIMARY KEY NOT NULL,
        project_id    TEXT NOT NULL,
        rojo          TEXT NOT NULL,
        title         TEXT,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        activity      INTEGER NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0,
        step_count    INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX conversations_by_project_activity
        ON conversations (project_id, activity);
    CREATE TABLE messages (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        step            INTEGER NOT NULL,
        json            TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    ) STRICT;",
    // 2: each conversation's stored size, the bytes of its messages' JSON text, so a
    // full conversation is refused without reading its messages. `append` adds each
    // step's bytes in the step's transaction; rows already stored are counted here.
    "ALTER TABLE conversations ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations SET stored_bytes = (
        SELECT coalesce(sum(octet_length(json)), 0) FROM messages
        WHERE messages.conversation_id = conversations.id
    );",
    // 3: the title the user gave (`rename`); `NULL` shows the derived `title`.
    "ALTER TABLE conversations ADD COLUMN custom_title TEXT;",
    // 4: approvals (`crate::approvals`): the calls waiting for (or given) the user's
    // decision, and the tools approved for the rest of a conversation. Deleted with their
    // conversation.
    "CREATE TABLE approvals (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        call_id         TEXT NOT NULL,
        tool            TEXT NOT NULL,
        state           TEXT NOT NULL,
        reason          TEXT,
        PRIMARY KEY (conversation_id, call_id)
    ) STRICT;
    CREATE TABLE approved_tools (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        tool            TEXT NOT NULL,
        PRIMARY KEY (conversation_id, tool)
    ) STRICT;",
    // 5: approvals keyed by an approval id the server makes for each call asked, not by the
    // model's call id, which is unique only within a turn (`crate::approvals`): a call id
    // asked again is a row of its own, and a decision names the one call the user was
    // shown. No index on `call_id`: a model's id may be of any length, and a conversation's
    // few approvals are found through the primary key's prefix. Rows of earlier versions
    // keep their call id as their approval id.
    "ALTER TABLE approvals RENAME TO approvals_by_call_id;
    CREATE TABLE approvals (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        approval_id     TEXT NOT NULL,
        call_id         TEXT NOT NULL,
        tool            TEXT NOT NULL,
        state           TEXT NOT NULL,
        reason          TEXT,
        PRIMARY KEY (conversation_id, approval_id)
    ) STRICT;
    INSERT INTO approvals (conversation_id, approval_id, call_id, tool, state, reason)
        SELECT conversation_id, call_id, call_id, tool, state, reason FROM approvals_by_call_id;
    DROP TABLE approvals_by_call_id;",
    // 6: the search index (`crate::search`, `queries::search_summaries`). `search_trigrams`
    // holds, for each user or assistant message with text, its searchable text folded to
    // lower case, as trigrams without positions (FTS5, `detail = 'none'`: a search looks up
    // the messages holding every trigram of its text, then checks each one's text, so a
    // search costs what its candidates weigh, not every message's text times the pattern).
    // Its rowid is a `search_docs.doc`: the project's `search_projects.number` times 2^32
    // plus a number within the project, so a search reads only its project's range. The
    // index holds no text (`content = ''`); messages and conversations delete their rows
    // (`queries`). Existing messages are indexed here.
    "CREATE TABLE search_projects (
        project_id TEXT PRIMARY KEY NOT NULL,
        number     INTEGER NOT NULL UNIQUE
    ) STRICT;
    CREATE TABLE search_docs (
        doc             INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        seq             INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX search_docs_by_message ON search_docs (conversation_id, seq);
    CREATE VIRTUAL TABLE search_trigrams USING fts5 (
        body, content = '', contentless_delete = 1, detail = 'none',
        tokenize = 'trigram case_sensitive 1'
    );
    INSERT INTO search_projects (project_id, number)
        SELECT project_id, row_number() OVER (ORDER BY project_id)
        FROM (SELECT DISTINCT project_id FROM conversations);
    INSERT INTO search_docs (doc, conversation_id, seq)
        SELECT p.number * 4294967296
                   + row_number() OVER (PARTITION BY p.number ORDER BY m.conversation_id, m.seq)
                   - 1,
               m.conversation_id, m.seq
        FROM messages m
        JOIN conversations c ON c.id = m.conversation_id
        JOIN search_projects p ON p.project_id = c.project_id
        WHERE rojos_search_text(m.json) IS NOT NULL;
    INSERT INTO search_trigrams (rowid, body)
        SELECT d.doc, rojos_fold(rojos_search_text(m.json))
        FROM search_docs d
        JOIN messages m ON m.conversation_id = d.conversation_id AND m.seq = d.seq;",
    // 7: compactions (`crate::compaction`): a summary of a conversation's first `covers`
    // messages, made by the model when the conversation outgrew its context window, sent in
    // their place by every later model turn. The messages themselves are kept. Replacing
    // messages (`replace_from`) deletes the summaries that covered any of them.
    "CREATE TABLE compactions (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        covers          INTEGER NOT NULL,
        summary         TEXT NOT NULL,
        created_at      INTEGER NOT NULL,
        PRIMARY KEY (conversation_id, covers)
    ) STRICT;",
    // 8: the index from which every turn of a conversation is known to have run under its
    // stored rojo (`ConversationHead::rojo_kept_from`). Earlier builds ran a follow-up under
    // whatever rojo its request named, so no turn stored before this step is known to have:
    // existing conversations start after their last message, new ones at 0.
    "ALTER TABLE conversations ADD COLUMN rojo_kept_from INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations SET rojo_kept_from = message_count;",
];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What [`migrate`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Migrated {
    /// The file is now at [`SCHEMA_VERSION`], having started at `from`.
    UpTo { from: i64 },
    /// The file has a newer version than this build knows; it was left alone.
    TooNew { found: i64 },
}

/// Applies the per-connection settings: foreign keys, `synchronous=NORMAL` (safe
/// with WAL: a power cut may lose the last commits, never corrupt the file) and
/// a busy timeout so a locked database is waited for rather than failed.
pub(crate) fn configure(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    register_fold(conn)?;
    register_search(conn)
}

/// `rojos_search_text(json)`: the searchable text of a message stored as JSON text
/// (`crate::search`), or `NULL`; `rojos_search_match(json, folded)`: whether that text,
/// folded, holds `folded`. Both in Rust, so the index, the check of its candidates and the
/// PostgreSQL store read the same text.
fn register_search(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("rojos_search_text", 1, flags, |ctx| {
        Ok(ctx
            .get::<Option<String>>(0)?
            .and_then(|json| search::search_text_of_json(&json)))
    })?;
    conn.create_scalar_function("rojos_search_match", 2, flags, |ctx| {
        let (json, folded) = (ctx.get::<Option<String>>(0)?, ctx.get::<String>(1)?);
        Ok(json.is_some_and(|json| search::message_matches(&json, &folded)))
    })
}

/// `rojos_fold(text)`: `text` in lower case by Unicode's rules, for case-insensitive search
/// (SQLite's own `lower()` and `LIKE` fold ASCII letters only, so `É` would not find `é`).
/// `NULL` stays `NULL`.
fn register_fold(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "rojos_fold",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(ctx
                .get::<Option<String>>(0)?
                .map(|text| search::fold(&text)))
        },
    )
}

/// Switches the file to write-ahead logging, so readers never block the writer.
/// The mode is stored in the file; returns the mode SQLite reports afterwards.
pub(crate) fn enable_wal(conn: &Connection) -> rusqlite::Result<String> {
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
}

/// Brings the database up to [`SCHEMA_VERSION`] in one immediate transaction, so
/// two processes opening the same new file migrate it once.
pub(crate) fn migrate(conn: &mut Connection) -> rusqlite::Result<Migrated> {
    // Steps call the store's own functions (version 5 indexes the stored messages).
    register_fold(conn)?;
    register_search(conn)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let from: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if from > SCHEMA_VERSION {
        return Ok(Migrated::TooNew { found: from });
    }
    // `from` is within 0..=SCHEMA_VERSION here, so it indexes MIGRATIONS.
    let start = usize::try_from(from).unwrap_or(0);
    for step in &MIGRATIONS[start..] {
        tx.execute_batch(step)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(Migrated::UpTo { from })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pragma_i64(conn: &Connection, name: &str) -> i64 {
        conn.pragma_query_value(None, name, |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn configured_connection_has_foreign_keys_normal_sync_and_a_busy_timeout() {
        let conn = Connection::open_in_memory().unwrap();
        configure(&conn, Duration::from_millis(1234)).unwrap();
        assert_eq!(pragma_i64(&conn, "foreign_keys"), 1);
        assert_eq!(pragma_i64(&conn, "synchronous"), 1, "1 is NORMAL");
        assert_eq!(pragma_i64(&conn, "busy_timeout"), 1234);
    }

    #[test]
    fn migrating_a_new_database_runs_every_step_and_records_the_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), Migrated::UpTo { from: 0 });
        assert_eq!(pragma_i64(&conn, "user_version"), SCHEMA_VERSION);
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table'
                 AND name IN ('conversations', 'messages')",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(tables, 2);
    }

    #[test]
    fn migrating_an_up_to_date_database_changes_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(
            migrate(&mut conn).unwrap(),
            Migrated::UpTo {
                from: SCHEMA_VERSION
            }
        );
    }

    #[test]
    fn a_database_from_a_newer_build_is_left_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        assert_eq!(
            migrate(&mut conn).unwrap(),
            Migrated::TooNew {
                found: SCHEMA_VERSION + 1
            }
        );
        assert_eq!(pragma_i64(&conn, "user_version"), SCHEMA_VERSION + 1);
    }
}
