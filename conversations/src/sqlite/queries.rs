//! The blocking SQL behind each store operation, run on a pooled connection.
//! A read is one transaction; `SqliteStore` moves it off the runtime. A write runs on the
//! writer thread inside the savepoint the writer opens for it (`pool`), which makes it
//! atomic: one that fails, or returns an error, is rolled back alone. So the writes here
//! open no transaction of their own (a nested savepoint was two more statements per write).
//! Rows are turned back into records here, so a corrupt row is reported by name. The search
//! index (schema version 6) is kept with the messages: each write that stores or deletes
//! messages adds or removes their index rows in the same savepoint.
//!
//! `writes` holds the writes, `reads` the reads; the store calls both through this module.

mod reads;
mod writes;

pub(super) use reads::{
    select_conversation, select_head, select_page, select_resumed, select_summaries, sql_limit,
    summary_of, SummaryRow, SUMMARY_COLUMNS,
};
pub(super) use writes::{
    delete_conversation, insert_conversation, insert_step, now_millis, project_docs, replace_step,
    update_custom_title, Replaced,
};
