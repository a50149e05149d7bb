//! The PostgreSQL schema, its version (rows of `rojos_schema_versions`) and the migrations
//! that bring any older database up to it. Migrating holds a transaction-scoped advisory
//! lock, so when several hosts start at once one migrates and the others wait, then find
//! nothing left to do. DDL is transactional in PostgreSQL: a failed step leaves no trace.
//! To evolve the schema, append a step to `MIGRATIONS`; never edit a shipped one.

use tokio_postgres::types::Type;
use tokio_postgres::Client;

/// Migration steps: `MIGRATIONS[n]` takes a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: conversations and their messages, as in the SQLite store (its versions 1 and 2).
    //
    // Times are Unix milliseconds (UTC) from the database's clock, so hosts' clocks need
    // not agree. `activity` orders a project's conversations by last change: each create
    // or append takes the next value of one sequence. `message_count` is also the `seq` of
    // the next message; all messages of one `append` share its `step`. Messages are kept
    // as the JSON text the host wrote (`text`, not `jsonb`, which would reorder keys), so
    // they come back byte for byte and `stored_bytes` counts the same bytes as SQLite.
    "CREATE FUNCTION rojos_now_ms() RETURNS bigint LANGUAGE sql VOLATILE
        AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
    CREATE SEQUENCE conversation_activity;
    CREATE TABLE conversations (
        id            text PRIMARY KEY,
        project_id    text NOT NULL,
        rojo          text NOT NULL,
        title         text,
        created_at    bigint NOT NULL,
        updated_at    bigint NOT NULL,
        activity      bigint NOT NULL,
        message_count bigint NOT NULL DEFAULT 0,
        step_count    bigint NOT NULL DEFAULT 0,
        stored_bytes  bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX conversations_by_project_activity ON conversations (project_id, activity);
    CREATE TABLE messages (
        conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq             bigint NOT NULL,
        step            bigint NOT NULL,
        json            text NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    );",
    // 2: run leases, one row per conversation with a run (or a crashed run's leftover),
    // shared by every host (see `crate::lease` and `super::lease`). Times are the
    // database's clock.
    "CREATE TABLE run_leases (
        conversation_id text PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
        holder          uuid NOT NULL,
        expires_at      timestamptz NOT NULL
    );",
    // 3: no foreign keys from messages and leases to their conversation. Each was a trigger
    // query per inserted row (seven per conversation of three turns, an eighth of the
    // server's time per append), and neither caught anything: a message is only ever
    // inserted by the statement that updates its conversation's row (`queries::insert_step`
    // inserts nothing when that row is missing), and a lease is only taken on a conversation
    // the host has just read or created.
    "ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_conversation_id_fkey;
    ALTER TABLE run_leases DROP CONSTRAINT IF EXISTS run_leases_conversation_id_fkey;",
    // 4: the title the user gave (`rename`); `NULL` shows the derived `title` (the SQLite
    // store's version 3).
    "ALTER TABLE conversations ADD COLUMN custom_title text;",
    // 5: approvals (`crate::approvals`, the SQLite store's version 4): calls waiting for
    // (or given) the user's decision, seen by every host, and the tools approved for the
    // rest of a conversation. No foreign key (see version 3); deleting a conversation
    // deletes its rows (`queries::delete_conversation`).
    "CREATE TABLE approvals (
        conversation_id text NOT NULL,
        call_id         text NOT NULL,
        tool            text NOT NULL,
        state           text NOT NULL,
        reason          text,
        PRIMARY KEY (conversation_id, call_id)
    );
    CREATE TABLE approved_tools (
        conversation_id text NOT NULL,
        tool            text NOT NULL,
        PRIMARY KEY (conversation_id, tool)
    );",
    // 6: approvals keyed by an approval id the server makes for each call asked, not by the
    // model's call id, which is unique only within a turn (`crate::approvals`, the SQLite
    // store's version 5): a call id asked again is a row of its own, and a decision names
    // the one call the user was shown. No index holds `call_id` any more: a model's id may
    // be longer than a B-tree entry can hold (about 2.7 kB), and a conversation's few
    // approvals are found through the primary key's prefix. Rows of earlier versions keep
    // their call id as their approval id.
    "ALTER TABLE approvals ADD COLUMN approval_id text;
    UPDATE approvals SET approval_id = call_id;
    ALTER TABLE approvals ALTER COLUMN approval_id SET NOT NULL;
    ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;
    ALTER TABLE approvals ADD PRIMARY KEY (conversation_id, approval_id);",
    // 7: the search index (`crate::search`, `queries::search_summaries`): each message's
    // searchable text in `search_text` (NULL for messages search does not read), written by
    // the statements that insert messages and indexed by trigrams (`pg_trgm`, a contrib
    // extension: `CREATE EXTENSION` needs a role allowed to create it in this database, see
    // `docs/deploy.md`), so `ILIKE` finds candidates without reading every message. Stored
    // messages get theirs here (a message whose text cannot be read gets none).
    "CREATE EXTENSION IF NOT EXISTS pg_trgm;
    ALTER TABLE messages ADD COLUMN search_text text;
    CREATE FUNCTION rojos_migration_search_text(message text) RETURNS text
    LANGUAGE plpgsql AS $$
    DECLARE
        m json;
        t text;
    BEGIN
        m := message::json;
        IF coalesce(m ->> 'role', '') NOT IN ('user', 'assistant') THEN
            RETURN NULL;
        END IF;
        CASE json_typeof(m -> 'content')
        WHEN 'string' THEN
            t := m ->> 'content';
        WHEN 'array' THEN
            SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.ord) INTO t
            FROM json_array_elements(m -> 'content') WITH ORDINALITY AS e (part, ord)
            WHERE json_typeof(e.part -> 'text') = 'string';
        ELSE
            t := NULL;
        END CASE;
        RETURN nullif(t, '');
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END
    $$;
    UPDATE messages SET search_text = rojos_migration_search_text(json);
    DROP FUNCTION rojos_migration_search_text(text);
    CREATE INDEX messages_search_text ON messages USING gin (search_text gin_trgm_ops);",
    // 8: compactions (`crate::compaction`, the SQLite store's version 7): a summary of a
    // conversation's first `covers` messages, sent in their place by later model turns.
    // Deleted with their conversation and by `replace_step` when it replaces covered ones.
    "CREATE TABLE compactions (
        conversation_id text NOT NULL,
        covers          bigint NOT NULL,
        summary         text NOT NULL,
        created_at      bigint NOT NULL,
        PRIMARY KEY (conversation_id, covers)
    );",
    // 9: shared run feeds (`crate::shared_feed`, `super::shared_feed`): the numbered event
    // lines of each conversation's current or last run, published by the host running it, so
    // any host can follow it or ask it to stop. `alive_until` (the database's clock) is
    // refreshed by the running host; a feed whose time passed before its run ended is a dead
    // host's. No foreign key (see version 3); deleting a conversation deletes its feed.
    "CREATE TABLE run_feeds (
        conversation_id text PRIMARY KEY,
        run             text NOT NULL,
        last_seq        bigint NOT NULL DEFAULT 0,
        done            boolean NOT NULL DEFAULT false,
        stop_asked      boolean NOT NULL DEFAULT false,
        alive_until     timestamptz NOT NULL,
        followed_at     timestamptz
    );
    CREATE TABLE run_events (
        run  text NOT NULL,
        seq  bigint NOT NULL,
        line text NOT NULL,
        PRIMARY KEY (run, seq)
    );",
    // 10: the index from which every turn of a conversation is known to have run under its
    // stored rojo (the SQLite store's version 8, `ConversationHead::rojo_kept_from`): no turn
    // stored by an earlier build is known to have, so existing conversations start after
    // their last message, new ones at 0.
    "ALTER TABLE conversations ADD COLUMN rojo_kept_from bigint NOT NULL DEFAULT 0;
    UPDATE conversations SET rojo_kept_from = message_count;",
];

/// The schema version this build creates and understands.
pub const POSTGRES_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock key that serializes migrations: "rojos" in ASCII, then 1.
const MIGRATION_LOCK: i64 = 0x726f_6a6f_7300_0001;

/// What a migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The version the database had.
    pub from: i64,
    /// The version it has now ([`POSTGRES_SCHEMA_VERSION`]).
    pub to: i64,
}

/// What [`migrate`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Migrated {
    /// The database is now at [`POSTGRES_SCHEMA_VERSION`].
    Done(Migration),
    /// The database has a newer version than this build knows; it was left alone.
    TooNew { found: i64 },
}

/// Brings the database up to [`POSTGRES_SCHEMA_VERSION`] in one transaction under the
/// migration lock.
pub(crate) async fn migrate(client: &mut Client) -> Result<Migrated, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // Unnamed statements (`query_typed`) throughout: they work behind a transaction pooler,
    // and a migration runs once.
    tx.query_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[(&MIGRATION_LOCK, Type::INT8)],
    )
    .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS rojos_schema_versions (
            version    bigint PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let from: i64 = tx
        .query_typed_one(
            "SELECT coalesce(max(version), 0)::bigint FROM rojos_schema_versions",
            &[],
        )
        .await?
        .get(0);
    if from > POSTGRES_SCHEMA_VERSION {
        return Ok(Migrated::TooNew { found: from });
    }
    // `from` is within 0..=POSTGRES_SCHEMA_VERSION here, so it indexes MIGRATIONS.
    let start = usize::try_from(from).unwrap_or(0);
    for (step, version) in MIGRATIONS[start..].iter().zip(from + 1..) {
        tx.batch_execute(step).await?;
        tx.query_typed(
            "INSERT INTO rojos_schema_versions (version) VALUES ($1)",
            &[(&version, Type::INT8)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Migrated::Done(Migration {
        from,
        to: POSTGRES_SCHEMA_VERSION,
    }))
}
