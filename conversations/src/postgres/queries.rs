//! The SQL behind each PostgreSQL store operation. Each is one statement, so it sees one
//! snapshot and commits (or fails) as a whole without a client-side transaction (a new
//! conversation with its first step included): `append` locks the conversation's row with
//! its `UPDATE`, so concurrent steps of one conversation are numbered one after the other.
//! `replace_step` is the exception: a transaction of five statements, the first locking the
//! conversation's row. Rows are turned back into records here. Statements are sent as
//! `statements` says (prepared, or unnamed behind a transaction pooler). Each message's
//! searchable text (`crate::search`) is stored beside it (`search_text`, schema version 7),
//! where a trigram index finds it.
//!
//! `writes` holds the writes, `reads` the reads; the store calls both through this module.

mod reads;
mod writes;

pub(crate) use reads::{
    conversation, page, resumed, search_summaries, select_conversation, select_head, select_page,
    select_resumed, select_summaries, summary,
};
pub(crate) use writes::{
    delete_conversation, insert_conversation, insert_step, replace_step, update_custom_title,
    Replaced,
};

/// Counts are never negative; a negative one (a hand-edited row) reads as 0.
fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
